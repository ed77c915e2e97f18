"""Thousands of malformed frames against `kgc serve` while a healthy member heartbeats.

Each malformed input arrives on its own connection; kgc must answer it or close that
connection, and the healthy member — on another connection — must never see an error,
a rebalance or a delay beyond its session timeout.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.aio_member import AioMember
from tests.support.kgc import kgc_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SERVED_KEYS = [3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 42, 47]


def header(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, correlation_id) + cid


frames = st.one_of(
    # a plausible header for a served API, followed by garbage
    st.builds(lambda k, v, c, cid, body: header(k, v, c, cid) + body,
              st.sampled_from(SERVED_KEYS), st.integers(-2, 20), st.integers(-2**31, 2**31 - 1),
              st.one_of(st.none(), st.binary(max_size=20)), st.binary(max_size=200)),
    # any api key at all
    st.builds(lambda k, v, body: header(k, v, 1, b"fuzz") + body,
              st.integers(-2**15, 2**15 - 1), st.integers(-2**15, 2**15 - 1), st.binary(max_size=64)),
    # pure noise
    st.binary(min_size=0, max_size=300),
)


def framed(kind: int, payload: bytes) -> bytes:
    if kind == 0:
        return struct.pack(">i", len(payload)) + payload
    if kind == 1:   # length says more than is sent (truncated)
        return struct.pack(">i", len(payload) + 10) + payload
    if kind == 2:   # absurd length: must be refused before allocation
        return struct.pack(">i", 2**31 - 1) + payload
    return struct.pack(">i", -len(payload) - 1) + payload


def send_and_drain(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass


class HealthyMember:
    """An aiokafka member on its own loop in a thread, so hypothesis can stay synchronous."""

    def __init__(self, bootstrap: str):
        self.loop = asyncio.new_event_loop()
        self.member = AioMember(bootstrap, "g-healthy", "t", 4, client_id="healthy",
                                session_timeout_ms=3000, heartbeat_ms=50)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def run(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self):
        self.thread.start()
        self.run(self.member.start())
        return self

    def __exit__(self, *exc):
        self.run(self.member.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_malformed_frames_never_disturb_a_healthy_member(tmp_path):
    with kgc_process("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0",
                     "--data-dir", str(tmp_path / "data"), log_path=str(tmp_path / "kgc.log")) as kgc, \
            HealthyMember(kgc.bootstrap) as healthy:

        async def joined():
            while healthy.member.assignment is None:
                await asyncio.sleep(0.02)
            return healthy.member.assignment.generation
        generation = healthy.run(joined())

        @settings(max_examples=3000, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(frames, st.integers(0, 3))
        def attack(payload, kind):
            send_and_drain(kgc.port, framed(kind, payload))

        attack()

        task = healthy.member._task
        assert task is not None and not task.done(), "the healthy member's heartbeat loop failed"
        assert healthy.member.assignment.generation == generation
        assert healthy.member.generations == [generation]
        assert kgc.proc.poll() is None
