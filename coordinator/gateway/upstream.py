"""One TCP connection to one upstream broker, pipelined, responses matched FIFO.

Kafka answers each connection in request order, so the in-flight queue is a deque of
(correlation id, future): every response must carry the id at its head, or the stream is
out of step and the connection is closed (aiokafka `conn.py`, kafka-python
`CorrelationIdError`). Requests that expect no response (Produce acks=0) are written but
take no place in the queue. Some brokers answer them anyway (Tansu does): a response
carrying the id of a recent acks=0 request, where another was due, is dropped, like
librdkafka drops responses to requests it no longer waits for.

`send` never awaits, so frames go out in the order they are sent; frames sent while the
connection is still being opened wait in a backlog and are written, in order, once it is.
A connection opened with a `prelude` (kgc's own SASL login) runs it first, its requests
going out ahead of the backlog through `send_ahead`; the backlog is written only once the
prelude succeeded, and a prelude that fails fails the connection, so no frame of the
backlog ever reaches the broker unauthenticated.
Any failure (refused, timed out, closed by the broker, unreadable stream) fails every
in-flight future with `UpstreamUnavailable`, and every later `send` too: a connection is
never reopened, because the client on the other side holds in-flight state that only a
reconnect of its own can reset.

Cut-through: a request sent with a `sink` (session.py gives one to Fetch responses it
passes on unchanged) may have its response passed on as it arrives rather than once it
is whole, so a large Fetch response crosses loopback once instead of twice in sequence.
When at least `STREAM_MIN_BYTES` of it are announced and not all of them are here yet,
the sink is asked to `begin`: it agrees only when the response is next in line for its
client. From then on every read is handed to `sink.write` as it came (no join, no
copy), the sink can `pause`/`resume` this connection's reading (its client reads
slowly) or `abort` it (its client went away: the rest of the response cannot be
delivered, nor can anything after it), and `sink.end` is called with the last byte,
before the response's future is settled with None. A response that is not next in line
when it starts arriving is gathered as before, and may still begin on a later read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, cast, overload

from coordinator import metrics
from protocol.framing import FrameError, FrameReader

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION_ID = struct.Struct(">i")

DEFAULT_MAX_RESPONSE_BYTES = 2**30
_UNANSWERED_IDS_KEPT = 1024


# Below this a response is gathered whole: it is one or two reads, and whole it goes out
# in the same write as the responses completed with it.
STREAM_MIN_BYTES = 64 * 1024


class ResponseSink(Protocol):
    """Where a streamed response goes (session.py's `ClientStream`)."""

    def begin(self, source: UpstreamConnection) -> bool: ...

    def write(self, data: bytes | memoryview) -> None: ...

    def end(self) -> None: ...


class UpstreamUnavailable(ConnectionError):
    """The upstream broker could not be reached, or dropped or garbled the connection.

    `before_connect` is true when nothing was sent at all (refused, timed out, unknown node).
    """

    def __init__(self, message: str, *, before_connect: bool = False):
        super().__init__(message)
        self.before_connect = before_connect


def failed_future(loop: asyncio.AbstractEventLoop, exc: BaseException) -> asyncio.Future:
    fut = loop.create_future()
    fut.set_exception(exc)
    return fut


class UpstreamConnection(asyncio.Protocol):
    def __init__(self, host: str, port: int, *, connect_timeout_ms: int,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 on_failure: Callable[[UpstreamUnavailable], None] | None = None,
                 tls: ssl.SSLContext | None = None,
                 prelude: Callable[[UpstreamConnection], Awaitable[None]] | None = None):
        self.host = host
        self._prelude = prelude
        self._tls = tls
        self.port = port
        self._connect_timeout_ms = connect_timeout_ms
        self._reader = FrameReader(max_response_bytes)
        self._in_flight: deque[tuple[int, asyncio.Future, ResponseSink | None]] = deque()
        self._stream: ResponseSink | None = None    # the sink of the response being passed on
        self._stream_remaining = 0                  # bytes of it still to come
        self._unanswered: deque[int] = deque(maxlen=_UNANSWERED_IDS_KEPT)  # recent acks=0 ids
        # Frames sent before the connection is ready, their futures (None: acks=0) and sinks.
        self._backlog: list[tuple[bytes, int, asyncio.Future | None, ResponseSink | None]] | None = []
        self._transport: asyncio.Transport | None = None
        self._failure: UpstreamUnavailable | None = None
        self._on_failure = on_failure
        self._loop = asyncio.get_running_loop()
        self._opening = self._loop.create_task(self._open())

    def __repr__(self) -> str:
        return f"UpstreamConnection({self.host}:{self.port})"

    @property
    def failure(self) -> UpstreamUnavailable | None:
        return self._failure

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def _open(self) -> None:
        try:
            # TLS: the broker's certificate must name the host kgc dials (its advertised host).
            server_hostname = None if self._tls is None else self.host
            await asyncio.wait_for(self._loop.create_connection(lambda: self, self.host, self.port, ssl=self._tls,
                                                                server_hostname=server_hostname),
                                   self._connect_timeout_ms / 1000)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError (a bad certificate) is an OSError
            # asyncio words a refused connection "Connect call failed" (uvloop does not): the
            # errno's own text says what happened.
            errno = None if isinstance(exc, ssl.SSLError) else exc.errno
            reason = os.strerror(errno) if errno else str(exc) or type(exc).__name__
            self._fail(UpstreamUnavailable(f"cannot connect to {self.host}:{self.port}: {reason}",
                                           before_connect=True))
            return
        if self._prelude is None or self._failure is not None:
            return
        try:
            await self._prelude(self)
        except (UpstreamUnavailable, TimeoutError) as exc:
            # Nothing of the backlog was written; the client's connection is closed (not
            # answered locally), as for any upstream failure after the connect.
            failure = UpstreamUnavailable(f"kgc's login at {self.host}:{self.port} failed: "
                                          f"{str(exc) or type(exc).__name__}")
            log.warning("closing a client's upstream connection: %s", failure)
            self._fail(failure, by_us=True)
            return
        if self._failure is None:
            self._release_backlog()

    @overload
    def send(self, correlation_id: int, payload: bytes, expect_response: Literal[True],
             sink: ResponseSink | None = None) -> asyncio.Future: ...

    @overload
    def send(self, correlation_id: int, payload: bytes, expect_response: bool,
             sink: ResponseSink | None = None) -> asyncio.Future | None: ...

    def send(self, correlation_id: int, payload: bytes, expect_response: bool,
             sink: ResponseSink | None = None) -> asyncio.Future | None:
        """Writes one request payload (header + body); returns the future of its response
        payload, or of None when the response went to `sink` as it arrived."""
        if self._failure is not None:
            return failed_future(self._loop, self._failure)
        frame = _SIZE.pack(len(payload)) + payload
        metrics.UPSTREAM_SENT.inc(len(frame))
        fut = self._loop.create_future() if expect_response else None
        if self._backlog is not None:
            self._backlog.append((frame, correlation_id, fut, sink))
        else:
            self._write(frame, correlation_id, fut, sink)
        return fut

    @overload
    def send_ahead(self, correlation_id: int, payload: bytes, expect_response: Literal[True]) -> asyncio.Future: ...

    @overload
    def send_ahead(self, correlation_id: int, payload: bytes, expect_response: bool) -> asyncio.Future | None: ...

    def send_ahead(self, correlation_id: int, payload: bytes, expect_response: bool) -> asyncio.Future | None:
        """`send` for the prelude: written at once, ahead of the backlog it holds back."""
        if self._failure is not None:
            return failed_future(self._loop, self._failure)
        frame = _SIZE.pack(len(payload)) + payload
        metrics.UPSTREAM_SENT.inc(len(frame))
        fut = self._loop.create_future() if expect_response else None
        self._write(frame, correlation_id, fut)
        return fut

    def _write(self, frame: bytes, correlation_id: int, fut: asyncio.Future | None,
               sink: ResponseSink | None = None) -> None:
        transport = self._transport
        assert transport is not None, "frames are written once the connection is made"
        transport.write(frame)
        if fut is None:
            self._unanswered.append(correlation_id)
        else:
            self._in_flight.append((correlation_id, fut, sink))

    def _release_backlog(self) -> None:
        backlog, self._backlog = self._backlog, None
        assert backlog is not None, "the backlog is released once, and only before a failure"
        for entry in backlog:
            self._write(*entry)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # create_connection gives a full Transport (asyncio types it as the base; uvloop's
        # does not subclass asyncio.Transport, so it cannot be checked with isinstance).
        self._transport = cast(asyncio.Transport, transport)
        if self._failure is not None:  # closed while the connect was under way
            transport.close()
            return
        if self._prelude is None:
            self._release_backlog()

    def data_received(self, data: bytes) -> None:
        metrics.UPSTREAM_RECEIVED.inc(len(data))
        unread: bytes | memoryview = data
        if self._stream is not None:
            rest = self._pass_on(self._stream, data)
            if not rest:
                return
            unread = rest
        try:
            payloads = self._reader.feed(unread)
        except FrameError as exc:
            self._fail(UpstreamUnavailable(f"unreadable stream from {self.host}:{self.port}: {exc}"))
            return
        for payload in payloads:
            if len(payload) < 4:
                self._fail(UpstreamUnavailable(f"{len(payload)}-byte response from {self.host}:{self.port}"))
                return
            correlation_id = _CORRELATION_ID.unpack_from(payload)[0]
            expected = self._in_flight[0][0] if self._in_flight else None
            if correlation_id == expected:
                fut = self._in_flight.popleft()[1]
                if not fut.done():  # a cancelled future: its client connection is gone
                    fut.set_result(payload)
            elif correlation_id in self._unanswered:
                self._unanswered.remove(correlation_id)
                log.debug("%s:%d answered acks=0 request %d: dropped", self.host, self.port, correlation_id)
            else:
                self._fail(UpstreamUnavailable(f"response {correlation_id} from {self.host}:{self.port} "
                                               f"where {expected} was due"))
                return
        if self._reader.partial_size >= STREAM_MIN_BYTES and self._in_flight:
            correlation_id, _, sink = self._in_flight[0]
            if sink is not None:
                self._begin_stream(correlation_id, sink)

    def _begin_stream(self, correlation_id: int, sink: ResponseSink) -> None:
        head = self._reader.partial_head(4)
        # Another id here is an acks=0 answer or a stream out of step: the reader's path decides.
        if len(head) < 4 or _CORRELATION_ID.unpack(head)[0] != correlation_id or not sink.begin(self):
            return
        size = self._reader.partial_size
        parts, self._stream_remaining = self._reader.take_partial()
        self._stream = sink
        metrics.UPSTREAM_STREAMED.inc()
        # What arrived before the stream began is small next to the rest: one write.
        sink.write(b"".join([_SIZE.pack(size), *parts]))

    def _pass_on(self, sink: ResponseSink, data: bytes) -> memoryview | None:
        """Hands the streamed response's bytes in `data` to `sink`; returns what follows it."""
        remaining = self._stream_remaining
        if len(data) < remaining:
            self._stream_remaining -= len(data)
            sink.write(data)
            return None
        rest = memoryview(data)[remaining:]
        sink.write(data if not rest else memoryview(data)[:remaining])
        if self._failure is not None:
            return None
        self._stream = None
        self._stream_remaining = 0
        fut = self._in_flight.popleft()[1]
        sink.end()
        if not fut.done():
            fut.set_result(None)
        return rest

    def pause(self) -> None:
        """Stop reading: the client the response streams to is not keeping up."""
        if self._failure is None and self._transport is not None:
            self._transport.pause_reading()

    def resume(self) -> None:
        if self._failure is None and self._transport is not None:
            self._transport.resume_reading()

    def abort(self) -> None:
        """The client the response streams to went away: nothing after it can be delivered."""
        self._fail(UpstreamUnavailable(f"the client went away during a response from {self.host}:{self.port}"),
                   by_us=True)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc else ""
        self._fail(UpstreamUnavailable(f"{self.host}:{self.port} closed the connection{reason}"))

    def _fail(self, error: UpstreamUnavailable, *, by_us: bool = False) -> None:
        if self._failure is not None:
            return
        self._failure = error
        # Our own close of an idle connection is routine; anything else is worth seeing.
        log.log(logging.DEBUG if by_us and not self._in_flight else logging.INFO,
                "upstream connection to %s:%d ended with %d in flight: %s",
                self.host, self.port, len(self._in_flight), error)
        in_flight, self._in_flight = self._in_flight, deque()
        backlog, self._backlog = self._backlog or [], None
        self._stream = None
        for fut in [fut for _, fut, _ in in_flight] + [fut for _, _, fut, _ in backlog if fut is not None]:
            if not fut.done():
                fut.set_exception(error)
        if self._transport is not None:
            self._transport.close()
        if self._on_failure is not None:
            self._on_failure(error)

    async def close(self) -> None:
        self._fail(UpstreamUnavailable(f"connection to {self.host}:{self.port} closed by kgc"), by_us=True)
        self._opening.cancel()
        await asyncio.wait([self._opening])


async def call(connection: UpstreamConnection, correlation_id: int, request: Any, response_class: Any, *,
               client_id: str, timeout_s: float) -> Any:
    """One request of kgc's own on `connection`, its answer decoded. A connection that does
    not answer in time is closed (a late answer would put it out of step); an unreadable
    answer is the connection's failure too."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    sent = connection.send(correlation_id, request.encode(header=True), True)
    try:
        payload = await asyncio.wait_for(sent, timeout_s)
    except TimeoutError as exc:
        await connection.close()
        raise UpstreamUnavailable(f"{connection.host}:{connection.port} did not answer "
                                  f"{type(request).__name__} within {timeout_s}s") from exc
    try:
        return response_class.decode(payload, version=request.API_VERSION, header=True)
    except Exception as exc:  # kafka-python raises assorted errors on an unreadable body
        raise UpstreamUnavailable(f"unreadable {response_class.__name__} from {connection.host}:"
                                  f"{connection.port}: {exc}") from exc
