"""Large request frames are decoded, and answered, off the loop without reordering.

A real `Dispatcher` behind a `KafkaConnection` on a fake transport; the codec pool is a
real thread whose jobs wait for the test's go-ahead, so the test sees what the loop did
while a large frame was still being decoded. The service records what it is asked.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.net.codec import LARGE_FRAME_BYTES
from coordinator.net.connection import ConnectionState, KafkaConnection
from coordinator.net.dispatch import Dispatcher
from coordinator.net.local_answers import LocalAnswers
from coordinator.node import CoordinatorNode
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from tests.support.builders import commit_request, heartbeat_request
from tests.support.fake_transport import FakeTransport
from tests.support.waiting import wait_until


class RecordingService:
    """Answers every request NONE, in its own shape, and remembers the order it saw them in."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def submit(self, ctx, api_key: int, request):
        self.seen.append(api_key)
        return error_response(api_key, ctx.api_version, request, ErrorCode.NONE)


class GatedPool(ThreadPoolExecutor):
    """One worker thread; each job waits for `go` and records what ran, on which thread."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="test-codec")
        self.go = threading.Event()
        self.ran: list[tuple[str, str]] = []

    def submit(self, fn, /, *args):
        def gated():
            self.go.wait(10)
            self.ran.append((fn.__name__, threading.current_thread().name))
            return fn(*args)
        return super().submit(gated)


def framed(request, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="c")
    return bytes(request.encode(header=True, framed=True))


def correlation_ids(written: bytes) -> list[int]:
    ids, at = [], 0
    while at < len(written):
        size, cid = struct.unpack_from(">ii", written, at)
        ids.append(cid)
        at += 4 + size
    return ids


async def connected(pool: GatedPool) -> tuple[KafkaConnection, FakeTransport, RecordingService]:
    service = RecordingService()
    dispatcher = Dispatcher(service, LocalAnswers(CoordinatorNode(0, "127.0.0.1", 9092)), codec_pool=pool)
    conn = KafkaConnection(dispatcher, max_frame_bytes=2**24, max_in_flight=16)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport, service


async def test_a_large_frame_is_decoded_off_the_loop_and_a_small_one_after_it_keeps_its_turn():
    pool = GatedPool()
    try:
        conn, transport, service = await connected(pool)
        large = framed(commit_request(8, "big", [("t", p, 1, None) for p in range(10_000)]), 1)
        assert len(large) > LARGE_FRAME_BYTES
        small = framed(heartbeat_request(4, "small", "m"), 2)

        committed = metrics.REGISTRY.get_sample_value("kgc_offsets_committed_total")
        conn.data_received(large + small)
        await asyncio.sleep(0.05)
        # The loop ran on while the large frame waited for its decode; the heartbeat read
        # after it waits its turn rather than overtaking it.
        assert service.seen == []
        assert transport.writes == []

        pool.go.set()
        await wait_until(lambda: len(correlation_ids(transport.written)) == 2, timeout_s=10)
        assert service.seen == [ApiKey.OffsetCommit, ApiKey.Heartbeat]
        assert correlation_ids(transport.written) == [1, 2]
        # its answer's codes are counted there too (10,000 of them), and added on the loop
        assert [name for name, _ in pool.ran] == ["decode", "_encoded_and_counted"]
        assert metrics.REGISTRY.get_sample_value("kgc_offsets_committed_total") == committed + 10_000
        assert all(thread.startswith("test-codec") for _, thread in pool.ran)
    finally:
        pool.go.set()
        pool.shutdown()


async def test_an_undecodable_large_frame_closes_the_connection_and_nothing_after_it_is_served():
    pool = GatedPool()
    pool.go.set()
    try:
        conn, transport, service = await connected(pool)
        # An OffsetCommit v8 header, then a body whose group id is null (it may not be).
        header = struct.pack(">hhih", ApiKey.OffsetCommit, 8, 1, 1) + b"c" + b"\x00"
        body = b"\x00" * (LARGE_FRAME_BYTES + 1)
        large = struct.pack(">i", len(header) + len(body)) + header + body
        small = framed(heartbeat_request(4, "small", "m"), 2)

        conn.data_received(large + small)
        await wait_until(lambda: conn.state is not ConnectionState.ACTIVE, timeout_s=10)
        await asyncio.sleep(0.05)
        assert transport.closed
        assert service.seen == []
        assert transport.writes == []
    finally:
        pool.shutdown()
