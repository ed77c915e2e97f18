"""The load generator's own Kafka client connection: frames out, response payloads back.

No client library is in the loop: a request is bytes we framed ourselves, and a response
is matched to it by position, as every Kafka client does (a broker answers each
connection in request order), with the correlation id checked. Requests may be
pipelined; a parked JoinGroup holds everything behind it on its connection, which is why
workloads give each simulated member a connection of its own.

Built on asyncio's Protocol rather than streams: the heartbeat and commit workloads push
tens of thousands of requests a second through one generator process, and the protocol
path saves a task switch per response.
"""

from __future__ import annotations

import asyncio
import collections
import struct

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
        self._waiting: collections.deque[tuple[int, asyncio.Future[bytes]]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._failure: Exception | None = None
        self._next_id = 0

    @classmethod
    async def open(cls, host: str, port: int, timeout_s: float = 10.0) -> BenchConnection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            _transport, conn = await loop.create_connection(cls, host, port)
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
            expected, future = self._waiting.popleft()
            got = _CORRELATION_ID.unpack_from(payload, 0)[0]
            if got != expected:
                self._fail(WireError(f"correlation id {got} answered request {expected}"))
                return
            if not future.done():
                future.set_result(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(WireError(f"connection lost: {exc or 'closed by peer'}"))

    def _fail(self, error: Exception) -> None:
        if self._failure is None:
            self._failure = error
        while self._waiting:
            _cid, future = self._waiting.popleft()
            if not future.done():
                future.set_exception(self._failure)
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
        self._transport.write(frame)
        return future

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._failure = self._failure or WireError("closed by the generator")
