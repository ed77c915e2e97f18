"""UpstreamConnection against brokers that misbehave in ways a real broker cannot be made to.

Everything a real broker does is tested against Tansu (test_session_tansu.py); these
servers send a wrong correlation id or hang up, which no real broker does on request.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from tests.support.tansu import free_port

BOUND_S = 2


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
