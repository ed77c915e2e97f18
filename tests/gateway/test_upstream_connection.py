"""UpstreamConnection against brokers that misbehave in ways a real broker cannot be made to.

Everything a real broker does is tested against Tansu (test_session_tansu.py); these
servers send a wrong correlation id or hang up, which no real broker does on request.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from coordinator.gateway.upstream import STREAM_MIN_BYTES, UpstreamConnection, UpstreamUnavailable
from tests.support.tansu import free_port
from tests.support.waiting import wait_until

BOUND_S = 10


async def serve(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def request(correlation_id: int) -> bytes:
    return struct.pack(">hhih", 18, 0, correlation_id, -1)  # ApiVersions v0 header, empty body


async def test_a_response_out_of_step_fails_everything_in_flight():
    async def answer_with_wrong_id(reader, writer):
        await reader.readexactly(4 + 10)
        writer.write(struct.pack(">ii", 4, 999))
        await writer.drain()
        await reader.read()

    server, port = await serve(answer_with_wrong_id)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        first, second = conn.send(1, request(1), True), conn.send(2, request(2), True)
        for fut in (first, second):
            with pytest.raises(UpstreamUnavailable, match="response 999 .* where 1 was due"):
                await asyncio.wait_for(fut, BOUND_S)
        with pytest.raises(UpstreamUnavailable):  # the connection is never reused
            await conn.send(3, request(3), True)
        await conn.close()


async def test_refused_connection_fails_before_anything_is_sent():
    conn = UpstreamConnection("127.0.0.1", free_port(), connect_timeout_ms=1000)
    with pytest.raises(UpstreamUnavailable) as failure:
        await asyncio.wait_for(conn.send(1, request(1), True), BOUND_S)
    assert failure.value.before_connect
    await conn.close()


async def test_requests_sent_while_connecting_go_out_in_order():
    seen = []

    async def echo_ids(reader, writer):
        for _ in range(3):
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            payload = await reader.readexactly(size)
            correlation_id = struct.unpack_from(">i", payload, 4)[0]
            seen.append(correlation_id)
            writer.write(struct.pack(">ii", 4, correlation_id))
        await writer.drain()
        await reader.read()

    server, port = await serve(echo_ids)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        futures = [conn.send(i, request(i), True) for i in (5, 6, 7)]
        payloads = await asyncio.wait_for(asyncio.gather(*futures), BOUND_S)
        assert seen == [5, 6, 7]
        assert [struct.unpack(">i", p)[0] for p in payloads] == [5, 6, 7]
        await conn.close()


async def echo_ids(reader, writer, seen: list[int], count: int) -> None:
    """Reads `count` requests, answering each with its correlation id alone."""
    for _ in range(count):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        correlation_id = struct.unpack_from(">i", await reader.readexactly(size), 4)[0]
        seen.append(correlation_id)
        writer.write(struct.pack(">ii", 4, correlation_id))
    await writer.drain()


async def test_a_prelude_goes_out_ahead_of_frames_sent_before_it_finished():
    seen = []

    async def broker(reader, writer):
        await echo_ids(reader, writer, seen, 4)
        await reader.read()

    async def log_in(conn: UpstreamConnection) -> None:
        for i in (1, 2):        # a two-step login, each step awaited, as SCRAM's is
            await asyncio.wait_for(conn.send_ahead(i, request(i), True), BOUND_S)

    server, port = await serve(broker)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000, prelude=log_in)
        futures = [conn.send(i, request(i), True) for i in (5, 6)]
        payloads = await asyncio.wait_for(asyncio.gather(*futures), BOUND_S)
        assert seen == [1, 2, 5, 6]
        assert [struct.unpack(">i", p)[0] for p in payloads] == [5, 6]
        await conn.close()


async def test_a_failed_prelude_writes_nothing_of_the_backlog_and_fails_it():
    seen = []
    rest = bytearray()

    async def broker(reader, writer):
        await echo_ids(reader, writer, seen, 1)
        rest.extend(await reader.read())             # until kgc closes: anything written after the login

    async def refused(conn: UpstreamConnection) -> None:
        await asyncio.wait_for(conn.send_ahead(1, request(1), True), BOUND_S)
        raise UpstreamUnavailable("refused kgc's login as kgc (error 58: Authentication failed)")

    server, port = await serve(broker)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000, prelude=refused)
        waiting = conn.send(5, request(5), True)
        assert conn.send(6, request(6), False) is None            # acks=0: no future, never written either
        with pytest.raises(UpstreamUnavailable, match="kgc's login at .* failed: refused kgc's login as kgc"):
            await asyncio.wait_for(waiting, BOUND_S)
        await conn.close()
        await asyncio.sleep(0.05)
        assert seen == [1] and rest == b""


class RecordingSink:
    """A client a response streams to: agrees to begin from its `accept_from`-th asking."""

    def __init__(self, accept_from: int = 1):
        self.accept_from = accept_from
        self.asked = 0
        self.writes: list[bytes] = []
        self.ended = 0
        self.source: UpstreamConnection | None = None

    def begin(self, source: UpstreamConnection) -> bool:
        self.asked += 1
        if self.asked < self.accept_from:
            return False
        self.source = source
        return True

    def write(self, data) -> None:
        assert not self.ended
        self.writes.append(bytes(data))

    def end(self) -> None:
        self.ended += 1

    @property
    def received(self) -> bytes:
        return b"".join(self.writes)


def response(correlation_id: int, body_bytes: int) -> bytes:
    payload = struct.pack(">i", correlation_id) + bytes(range(256)) * (body_bytes // 256)
    return struct.pack(">i", len(payload)) + payload


async def broker_answering(requests: int, frames: list[bytes], go: asyncio.Event, split_at: int):
    """Answers `requests` requests with `frames` written back to back, stopping after
    `split_at` bytes until `go` is set."""
    async def broker(reader, writer):
        for _ in range(requests):
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
        stream = b"".join(frames)
        writer.write(stream[:split_at])
        await writer.drain()
        await go.wait()
        writer.write(stream[split_at:])
        await writer.drain()
        await reader.read()
    return await serve(broker)


@pytest.mark.parametrize("accept_from", [1, 2], ids=["at-once", "on-a-later-read"])
async def test_a_large_response_streams_to_its_sink_before_it_is_whole(accept_from):
    big, after = response(1, 16 * STREAM_MIN_BYTES), response(2, 10)   # many reads: a later one takes over
    go = asyncio.Event()
    server, port = await broker_answering(2, [big, after], go, split_at=STREAM_MIN_BYTES)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        sink = RecordingSink(accept_from)
        streamed, answered = conn.send(1, request(1), True, sink), conn.send(2, request(2), True, RecordingSink())
        if accept_from == 1:
            await wait_until(lambda: sink.received, what="the first bytes passed on")
            assert big.startswith(sink.received) and not streamed.done()
        go.set()
        assert await asyncio.wait_for(streamed, BOUND_S) is None
        assert sink.received == big and sink.ended == 1, "size prefix and payload, byte for byte"
        assert await asyncio.wait_for(answered, BOUND_S) == after[4:], "a small response is gathered whole"
        await conn.close()


async def test_a_response_whose_sink_declines_is_gathered_whole():
    big = response(1, 4 * STREAM_MIN_BYTES)
    go = asyncio.Event()
    go.set()
    server, port = await broker_answering(1, [big], go, split_at=1000)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        sink = RecordingSink(accept_from=10**9)
        assert await asyncio.wait_for(conn.send(1, request(1), True, sink), BOUND_S) == big[4:]
        assert sink.asked >= 1 and sink.writes == []
        await conn.close()


async def test_a_paused_stream_reads_nothing_until_resumed():
    big = response(1, 64 * STREAM_MIN_BYTES)
    go = asyncio.Event()
    server, port = await broker_answering(1, [big], go, split_at=STREAM_MIN_BYTES + 100)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        sink = RecordingSink()
        streamed = conn.send(1, request(1), True, sink)
        await wait_until(lambda: sink.received, what="the stream began")
        sink.source.pause()
        go.set()
        await asyncio.sleep(0.1)
        held = len(sink.received)
        await asyncio.sleep(0.1)
        assert len(sink.received) == held < len(big), "paused: the rest waits in the sockets"
        sink.source.resume()
        assert await asyncio.wait_for(streamed, BOUND_S) is None
        assert sink.received == big
        await conn.close()


async def test_a_stream_aborted_by_its_client_fails_the_connection():
    big = response(1, 4 * STREAM_MIN_BYTES)
    go = asyncio.Event()
    server, port = await broker_answering(2, [big, response(2, 10)], go, split_at=STREAM_MIN_BYTES)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        sink = RecordingSink()
        streamed, behind = conn.send(1, request(1), True, sink), conn.send(2, request(2), True)
        await wait_until(lambda: sink.received, what="the stream began")
        sink.source.abort()
        go.set()
        for fut in (streamed, behind):
            with pytest.raises(UpstreamUnavailable, match="client went away"):
                await asyncio.wait_for(fut, BOUND_S)
        with pytest.raises(UpstreamUnavailable):
            await conn.send(3, request(3), True)
        assert not sink.ended
        await conn.close()


async def test_an_upstream_that_hangs_up_mid_stream_fails_the_response():
    big = response(1, 4 * STREAM_MIN_BYTES)

    async def broker(reader, writer):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)
        writer.write(big[:2 * STREAM_MIN_BYTES])
        await writer.drain()
        writer.close()

    server, port = await serve(broker)
    async with server:
        conn = UpstreamConnection("127.0.0.1", port, connect_timeout_ms=1000)
        sink = RecordingSink()
        with pytest.raises(UpstreamUnavailable, match="closed the connection"):
            await asyncio.wait_for(conn.send(1, request(1), True, sink), BOUND_S)
        assert sink.received and not sink.ended
        await conn.close()
