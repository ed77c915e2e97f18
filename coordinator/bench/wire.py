"""The load generator's own Kafka client connection: frames out, response payloads back.

No client library is in the loop: a request is bytes we framed ourselves, and a response
is matched to it by position, as every Kafka client does (a broker answers each
connection in request order), with the correlation id checked. Requests may be
pipelined; a parked JoinGroup holds everything behind it on its connection, which is why
workloads give each simulated member a connection of its own.

Built on asyncio's Protocol rather than streams: the heartbeat and commit workloads push
tens of thousands of requests a second through one generator process, and the protocol
path saves a task switch per response. `repeat` goes further for the heartbeat
workload: the next request is sent from the callback that receives the answer, with no
future or coroutine per round trip, so the generator spends less of the shared cores
than the target it measures (an echo server on this machine does ~57 k round trips/s
over 200 connections against it).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
import time
from collections.abc import Callable

from protocol.framing import FrameReader

_CORRELATION_ID = struct.Struct(">i")
MAX_RESPONSE_BYTES = 100 * 2**20


class WireError(Exception):
    """The connection broke or answered out of order: the workload cannot go on."""


class Template:
    """A request frame encoded once and re-sent with a fresh correlation id.

    A new bytes object per send: the transport may keep a reference to what it was
    given until the socket takes it, so a shared buffer must never be patched in place.
    """

    __slots__ = ("_head", "_tail")

    def __init__(self, frame: bytes):
        # size (4), api_key (2), api_version (2), then the correlation id (4)
        self._head = bytes(frame[:8])
        self._tail = bytes(frame[12:])

    def frame(self, correlation_id: int) -> bytes:
        return self._head + _CORRELATION_ID.pack(correlation_id) + self._tail


class BenchConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self._reader = FrameReader(MAX_RESPONSE_BYTES)
        # Each request's correlation id, and who takes its answer: a `send`'s future, or the
        # running `repeat`.
        self._waiting: collections.deque[tuple[int, asyncio.Future[bytes] | _Repeat]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._failure: Exception | None = None
        self._next_id = 0
        self._repeating: _Repeat | None = None
        # Where `open` connected, and with what TLS: a client opens its other connections
        # (to the coordinators FindCoordinator names) alike.
        self.address: tuple[str, int] | None = None
        self.tls: ssl.SSLContext | None = None

    @classmethod
    async def open(cls, host: str, port: int, timeout_s: float = 10.0,
                   tls: ssl.SSLContext | None = None) -> BenchConnection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            _transport, conn = await loop.create_connection(cls, host, port, ssl=tls)
        conn.address, conn.tls = (host, port), tls
        return conn

    def connection_made(self, transport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            payloads = self._reader.feed(data)
        except Exception as exc:
            self._fail(WireError(f"unframeable response stream: {exc}"))
            return
        for payload in payloads:
            if not self._waiting:
                self._fail(WireError("a response arrived with no request waiting"))
                return
            expected, waiter = self._waiting.popleft()
            got = _CORRELATION_ID.unpack_from(payload, 0)[0]
            if got != expected:
                self._fail(WireError(f"correlation id {got} answered request {expected}"))
                return
            if isinstance(waiter, _Repeat):
                self._repeat_answered(waiter, payload)
            elif not waiter.done():
                waiter.set_result(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(WireError(f"connection lost: {exc or 'closed by peer'}"))

    def _fail(self, error: Exception) -> None:
        if self._failure is None:
            self._failure = error
        while self._waiting:
            _cid, waiter = self._waiting.popleft()
            if not isinstance(waiter, _Repeat) and not waiter.done():
                waiter.set_exception(self._failure)
        if self._repeating is not None and not self._repeating.done.done():
            self._repeating.done.set_exception(self._failure)
        if self._transport is not None:
            self._transport.close()

    def next_correlation_id(self) -> int:
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        return self._next_id

    def send(self, frame: bytes, correlation_id: int) -> asyncio.Future[bytes]:
        """Write one request frame; the future gets the whole response payload (header included)."""
        if self._failure is not None:
            raise self._failure
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((correlation_id, future))
        self._write(frame)
        return future

    def repeat(self, template: Template, until: float,
               on_answer: Callable[[bytes, int, int], None]) -> asyncio.Future[None]:
        """Keep one request of `template` in flight until `time.perf_counter()` passes
        `until`; `on_answer(payload, sent_ns, answered_ns)` sees every response. Nothing
        else may be sent on this connection meanwhile."""
        if self._failure is not None:
            raise self._failure
        if self._waiting or self._repeating is not None:
            raise WireError("repeat needs an idle connection")
        done = asyncio.get_running_loop().create_future()
        self._repeating = _Repeat(template, int(until * 1e9), on_answer, done)
        self._repeat_send(self._repeating)
        return done

    def _repeat_send(self, repeat: _Repeat) -> None:
        cid = self.next_correlation_id()
        self._waiting.append((cid, repeat))
        repeat.sent_ns = time.perf_counter_ns()
        self._write(repeat.template.frame(cid))

    def _repeat_answered(self, repeat: _Repeat, payload: bytes) -> None:
        now_ns = time.perf_counter_ns()
        if now_ns >= repeat.until_ns:
            self._repeating = None
            repeat.done.set_result(None)
            return
        repeat.on_answer(payload, repeat.sent_ns, now_ns)
        self._repeat_send(repeat)

    def _write(self, frame: bytes) -> None:
        if self._transport is None:
            raise WireError("not connected: a BenchConnection is made by BenchConnection.open")
        self._transport.write(frame)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._failure = self._failure or WireError("closed by the generator")


class _Repeat:
    __slots__ = ("template", "until_ns", "on_answer", "done", "sent_ns")

    def __init__(self, template: Template, until_ns: int, on_answer: Callable[[bytes, int, int], None],
                 done: asyncio.Future[None]):
        self.template = template
        self.until_ns = until_ns
        self.on_answer = on_answer
        self.done = done
        self.sent_ns = 0
