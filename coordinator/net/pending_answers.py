"""Answers that come later: a request whose answer waits on a future, and how a
connection's frame future follows that future.

`PendingAnswer` is the callback that turns a runtime future into the answer frame once it
is done (`Dispatcher.respond_later`); `settle` ties a frame to an outcome that may be
a future itself (a large frame decoded off the loop, a frame held behind one).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Protocol

from coordinator import metrics
from coordinator.group.context import RequestContext


class Responder(Protocol):
    """What makes a parked request's answer frame (`dispatch.Dispatcher`)."""

    def respond_later(self, ctx: RequestContext, header, payload: bytes, request_metrics: metrics.RequestMetrics,
                      outcome: asyncio.Future, finish: Any) -> bytes | asyncio.Future | None: ...


class PendingAnswer:
    """A request answered later: the done-callback of both its runtime future (`outcome`)
    and the connection's `frame` future.

    One slotted object serves as both callbacks, and it keeps the request's bytes rather
    than the decoded request, which is decoded again only to shape an error answer: a
    burst of parked JoinGroups holds one of these per member, and the allocator keeps the
    memory such a burst took (docs/benchmarks/notes.md, "Memory per member")."""

    __slots__ = ("_dispatcher", "_ctx", "_header", "_payload", "_metrics", "_frame", "_outcome", "_finish")

    def __init__(self, dispatcher: Responder, ctx: RequestContext, header, payload: bytes,
                 request_metrics: metrics.RequestMetrics, frame: asyncio.Future, outcome: asyncio.Future,
                 finish=None):
        self._dispatcher = dispatcher
        self._ctx = ctx
        self._header = header
        self._payload = payload
        self._metrics = request_metrics
        self._frame = frame
        self._outcome = outcome
        self._finish = finish       # the authorizer's edit of the answer (denied parts), if any

    def __call__(self, done: asyncio.Future) -> None:
        frame, outcome = self._frame, self._outcome
        if done is frame:
            # The connection cancels a frame its client will never read; the partition
            # then skips the request if it has not run yet.
            if frame.cancelled():
                outcome.cancel()
            return
        if frame.done():
            return      # the client went away
        if outcome.cancelled():
            frame.cancel()
            return
        try:
            settle(frame, self._dispatcher.respond_later(self._ctx, self._header, self._payload, self._metrics,
                                                         outcome, self._finish))
        except Exception as exc:
            frame.set_exception(exc)


def settle(frame: asyncio.Future, outcome: bytes | asyncio.Future | None) -> None:
    """Settle `frame` with `outcome`, now or when the outcome future is done; a cancelled
    frame (its client went away) cancels the outcome."""
    if not isinstance(outcome, asyncio.Future):
        frame.set_result(outcome)
        return
    outcome.add_done_callback(partial(_relay, frame))
    frame.add_done_callback(partial(_cancel_with, outcome))


def _relay(frame: asyncio.Future, outcome: asyncio.Future) -> None:
    if frame.done():
        if not outcome.cancelled():
            outcome.exception()     # retrieved: the client is gone, nobody else will look
    elif outcome.cancelled():
        frame.cancel()
    elif (exc := outcome.exception()) is not None:
        frame.set_exception(exc)
    else:
        frame.set_result(outcome.result())


def _cancel_with(outcome: asyncio.Future, frame: asyncio.Future) -> None:
    if frame.cancelled():
        outcome.cancel()
