"""One client connection: frames in, responses out in request order.

Requests are pipelined (librdkafka keeps many in flight), but Kafka clients match
responses to requests by order, so every request that expects a response takes a slot
in a FIFO; a response is written only when every slot before it is written. A parked
JoinGroup therefore holds back later responses of its own connection only.

Backpressure: when the slots reach `max_in_flight`, or the transport's write buffer is
over its high-water mark, reading pauses until the writer catches up (aiohttp's
`_pause_msg_queue_reading`).

Streamed responses: a forwarded response can be passed on as it arrives instead of once
it is whole (the gateway does it for large Fetch responses). Its source asks
`begin_stream` when its first bytes are in; that writes every response ready ahead of
it and agrees only if its slot is then at the head. Its bytes then go out through
`stream` as they come, and later responses wait behind it as behind any slot. While it
streams, the client's back-pressure reaches the source: `pause_writing` pauses it, and
a connection that closes aborts it (the rest can reach no one). `end_stream` comes with
its last byte, its slot settled with None (nothing left to write), and the queue moves on.

Connection states: ACTIVE → (DRAINING →) CLOSING → CLOSED. A protocol violation (bad
frame, bad header, undecodable request, unknown API) logs why and closes: Kafka does the
same, and a client that sent garbage cannot be answered in a shape it would understand.
DRAINING is graceful shutdown: reading stops for good, and the responses already owed
are still written in order.

Before its login (a listener with SASL), a connection reads frames of at most
`login_frame_bytes` (Kafka's `sasl.server.max.receive.size`), judged on the size in the
frame's first four bytes, so a client that has not logged in cannot make kgc hold more
than that for it; `logged_in` raises the limit to `max_frame_bytes`. `last_active` (the
clock's time of the last read or write) is what the listener's idle sweep looks at.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, cast

from coordinator.security.tls import peer_certificate
from protocol.framing import FrameError, FrameReader, FrameTooLarge
from storage.eager_future import EagerFuture

log = logging.getLogger(__name__)


class ProtocolViolation(Exception):
    """The client sent something that cannot be answered: close the connection."""


class LastFrame(bytes):
    """A response after which the connection closes (a refused SASL exchange, as Kafka
    answers it): written in its turn, then the connection closes and reads no more."""

    __slots__ = ()


class ConnectionState(enum.Enum):
    ACTIVE = "active"
    DRAINING = "draining"
    CLOSING = "closing"
    CLOSED = "closed"


_WRITING = frozenset({ConnectionState.ACTIVE, ConnectionState.DRAINING})


class StreamSource(Protocol):
    """Where a streamed response comes from (the gateway's upstream connection)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def abort(self) -> None: ...


class FrameHandler(Protocol):
    """What a connection hands its frames to (`dispatch.Dispatcher` is the one there is)."""

    def open(self, conn: KafkaConnection) -> Any: ...

    def dispatch(self, session: Any, payload: bytes) -> bytes | asyncio.Future | None: ...

    def close(self, session: Any) -> None: ...


class KafkaConnection(asyncio.Protocol):
    __slots__ = (
        "_dispatcher", "_reader", "_slots", "_transport", "_session", "_max_in_flight",
        "_reading_paused", "_writing_paused", "state", "peer_host", "listener_node_id", "tls",
        "peer_certificate", "_dispatching", "_stream_source", "_max_frame_bytes", "_clock", "last_active",
    )

    def __init__(self, dispatcher: FrameHandler, *, max_frame_bytes: int, max_in_flight: int,
                 listener_node_id: int | None = None, tls: bool = False, login_frame_bytes: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._dispatcher = dispatcher
        self._max_frame_bytes = max_frame_bytes
        self._reader = FrameReader(max_frame_bytes if login_frame_bytes is None else login_frame_bytes)
        self._clock = clock
        self.last_active = clock()
        self._slots: deque[bytes | asyncio.Future] = deque()
        self._transport: asyncio.Transport | None = None
        self._session: Any = None
        self._max_in_flight = max_in_flight
        self._reading_paused = False
        self._writing_paused = False
        self.state = ConnectionState.ACTIVE
        self.peer_host = "unknown"
        self.listener_node_id = listener_node_id
        self.tls = tls
        self.peer_certificate: bytes | None = None   # DER, when a TLS client presented one
        self._dispatching = False
        self._stream_source: StreamSource | None = None   # while a response streams

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream server's protocol is given a full Transport (asyncio types it as the base).
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer_host = peer[0]
        if self.tls:
            self.peer_certificate = peer_certificate(transport)
        self._session = self._dispatcher.open(self)

    def logged_in(self) -> None:
        """The client has logged in: from its next frame on, frames up to `max_frame_bytes`."""
        self._reader.max_frame_bytes = self._max_frame_bytes

    def data_received(self, data: bytes) -> None:
        if self.state is not ConnectionState.ACTIVE:
            return
        self.last_active = self._clock()
        slots = self._slots
        # Answers made while no earlier response is owed skip the slot queue (the common
        # case: one Heartbeat per read); they go out in one write, before any slot.
        ready: list[bytes] = []
        # A response settled while this loop runs is left to the flush at its end: the
        # answers gathered in `ready` go out first.
        self._dispatching = True
        try:
            for payload in self._reader.feed(data):
                outcome = self._dispatcher.dispatch(self._session, payload)
                if outcome is None:
                    continue
                if not slots and type(outcome) is bytes:
                    ready.append(outcome)
                    continue
                slots.append(outcome)
                if isinstance(outcome, EagerFuture):
                    outcome.when_done(self._on_slot_settled)
                elif isinstance(outcome, asyncio.Future):
                    outcome.add_done_callback(self._on_slot_done)
                elif type(outcome) is LastFrame:
                    break
        except (FrameError, ProtocolViolation) as exc:
            why = str(exc)
            if isinstance(exc, FrameTooLarge) and self._reader.max_frame_bytes < self._max_frame_bytes:
                why += " before login (sasl_server_max_receive_size)"
            if not self.tls and data[:2] == b"\x16\x03":
                why = "it speaks TLS to a plaintext listener (set the client's security.protocol to match kgc's)"
            log.warning("closing connection from %s: %s", self.peer_host, why)
            self._write(ready)
            self.close()
            return
        finally:
            self._dispatching = False
        self._write(ready)
        if slots:
            self._flush()
        elif self._reading_paused:
            self._apply_backpressure()

    def _on_slot_settled(self, fut: asyncio.Future) -> None:
        """`_on_slot_done` called in the call that settled the response (see EagerFuture),
        so the answer leaves without another loop turn."""
        if not self._dispatching:
            self._on_slot_done(fut)

    def _on_slot_done(self, fut: asyncio.Future) -> None:
        # Only the oldest response can unblock writing; a later one waits its turn.
        if self._slots and self._slots[0] is fut:
            self._flush()

    def _flush(self) -> None:
        slots = self._slots
        ready: list[bytes] = []
        while slots and self.state in _WRITING:
            head = slots[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                if head.cancelled():
                    self._write(ready)
                    self.close()
                    return
                exc = head.exception()
                if exc is not None:
                    log.warning("closing connection from %s: %s", self.peer_host, exc)
                    self._write(ready)
                    self.close()
                    return
                frame = head.result()
            else:
                frame = head
            slots.popleft()
            if frame is not None:
                ready.append(frame)
                if type(frame) is LastFrame:
                    self._write(ready)
                    self.close()
                    return
        self._write(ready)
        self._apply_backpressure()

    def _write(self, ready: list[bytes]) -> None:
        # One write per flush: responses completed together (a pipelined batch, a group
        # commit releasing many) go out in one send.
        if ready and self.state in _WRITING:
            self.last_active = self._clock()
            transport = self._transport
            assert transport is not None, "a connection writes once it is made"
            transport.write(ready[0] if len(ready) == 1 else b"".join(ready))

    def _apply_backpressure(self) -> None:
        if self.state is not ConnectionState.ACTIVE:
            return
        should_pause = self._writing_paused or len(self._slots) >= self._max_in_flight
        if should_pause != self._reading_paused:
            transport = self._transport
            assert transport is not None, "a connection reads once it is made"
            self._reading_paused = should_pause
            if should_pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._stream_source is not None:
            self._stream_source.pause()
        self._apply_backpressure()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._stream_source is not None:
            self._stream_source.resume()
        self._apply_backpressure()

    def begin_stream(self, slot: asyncio.Future, source: StreamSource) -> bool:
        """May `slot`'s response be written as it arrives, from now on? Only when every
        response ahead of it has been written (they are, here, if they are ready)."""
        if self._stream_source is not None or self.state not in _WRITING:
            return False
        self._flush()
        if not self._slots or self._slots[0] is not slot or self.state not in _WRITING:
            return False
        self._stream_source = source
        if self._writing_paused:
            source.pause()
        return True

    def stream(self, data: bytes | memoryview) -> None:
        if self.state in _WRITING:
            self.last_active = self._clock()
            transport = self._transport
            assert transport is not None, "a connection streams once it is made"
            transport.write(data)

    def end_stream(self) -> None:
        """The streamed response's last byte went out and its slot is settled: move on."""
        source, self._stream_source = self._stream_source, None
        if source is not None and self._writing_paused:
            source.resume()     # the next response is gathered whole again, as it may be
        self._flush()

    def _abort_stream(self) -> None:
        source, self._stream_source = self._stream_source, None
        if source is not None:
            source.abort()

    def drain(self) -> None:
        """Read no more requests; those already read are still answered."""
        if self.state is ConnectionState.ACTIVE:
            self.state = ConnectionState.DRAINING
            if not self._reading_paused and self._transport is not None:
                self._reading_paused = True
                self._transport.pause_reading()

    def close(self) -> None:
        if self.state in _WRITING:
            self.state = ConnectionState.CLOSING
            self._abort_stream()
            if self._transport is not None:
                self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.state = ConnectionState.CLOSED
        self._abort_stream()
        for slot in self._slots:
            if isinstance(slot, asyncio.Future):
                if slot.done() and not slot.cancelled():
                    slot.exception()  # retrieved: the client is gone, nobody else will look
                slot.cancel()
        self._slots.clear()
        if self._session is not None:
            self._dispatcher.close(self._session)
            self._session = None

    @property
    def in_flight(self) -> int:
        return len(self._slots)
