"""How a partition's answers reach their requests: the reply handles an op is given,
and the answers parked until the write they wait on is durable.

A handle is what the state machine keeps for a request it answers later (`Reply` in
`common/result.py`); the runtime (`partition.py`) settles its future. A `Parked` entry
holds the answers (and the `after_commit`) of one Result until the log is durable up to
its offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from coordinator.common.result import Result

Scope = Hashable


class FutureReplyHandle:
    """The `ReplyHandle` the state machine keeps for a parked request."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future):
        self.future = future


class InlineHandle:
    """The handle of an op run inline: its future exists only once something needs it
    (the op parked the request, or the answer waits on durability), since most inline
    answers (Heartbeat) are returned at once and a future per request is measurable."""

    __slots__ = ("_future", "_new_waiter")

    def __init__(self, new_waiter: Callable[[], asyncio.Future]):
        self._future: asyncio.Future | None = None
        self._new_waiter = new_waiter

    @property
    def future(self) -> asyncio.Future:
        if self._future is None:
            self._future = self._new_waiter()
        return self._future

    @property
    def materialized(self) -> bool:
        return self._future is not None


@dataclass(slots=True)
class Parked:
    offset: int
    completions: list[tuple[asyncio.Future, Any]]
    after_commit: Callable[[], Result] | None
    scope: Scope = None
