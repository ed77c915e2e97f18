"""Thousands of malformed frames against `kgc serve` while a healthy member heartbeats.

Each malformed input arrives on its own connection; kgc must answer it or close that
connection, and the healthy member — on another connection — must never see an error,
a rebalance or a delay beyond its session timeout.

Two kinds of input: bytes (malformed, truncated, oversized frames) and schema-valid but
hostile requests (every group API kgc serves, at any version, with ids past what the
record format holds, repeated protocol names, extreme timeouts and offsets, thousands of
groups, keys or filter entries), each for a group other than the healthy member's.
`KGC_FUZZ_FRAMES=N` sets how many of each the run sends (the longer run: docs/benchmarks/notes.md, "The long fuzz run");
the run prints the frames sent and kgc's RSS before and after.
"""

from __future__ import annotations

import asyncio
import os
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.aio_member import AioMember
from tests.support.hostile_requests import encoded, hostile_requests, send_and_drain
from tests.support.kgc import kgc_process, rss_bytes

FRAMES = int(os.environ.get("KGC_FUZZ_FRAMES", "0"))
pytestmark = [pytest.mark.integration, pytest.mark.timeout(7200 if FRAMES else 300)]

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


class HealthyMember:
    """An aiokafka member on its own loop in a thread, so hypothesis can stay synchronous."""

    def __init__(self, bootstrap: str):
        self.loop = asyncio.new_event_loop()
        self.member = AioMember(bootstrap, "g-healthy", "t", 4, client_id="healthy",
                                session_timeout_ms=10_000, heartbeat_ms=50)
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
    def attack(kgc):
        @settings(max_examples=FRAMES or 3000, deadline=None, derandomize=not FRAMES,
                  suppress_health_check=list(HealthCheck))
        @given(frames, st.integers(0, 3))
        def malformed(payload, kind):
            send_and_drain(kgc.port, framed(kind, payload))

        malformed()
        return FRAMES or 3000

    under_attack(tmp_path, attack)


def test_schema_valid_hostile_requests_never_disturb_a_healthy_member(tmp_path):
    def attack(kgc):
        sent = [0]

        @settings(max_examples=FRAMES or 400, deadline=None, derandomize=not FRAMES,
                  suppress_health_check=list(HealthCheck))
        @given(hostile_requests)
        def hostile(request):
            frame = encoded(request)
            if frame is not None:
                send_and_drain(kgc.port, frame, park_s=0.5)
                sent[0] += 1

        hostile()
        return sent[0]

    under_attack(tmp_path, attack)


def under_attack(tmp_path, attack) -> None:
    """`attack(kgc)` (returning the frames it sent) against `kgc serve` while a healthy
    member heartbeats; the member must see no error, no rebalance, and kgc must live."""
    with kgc_process("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "0",
                     "--data-dir", str(tmp_path / "data"), log_path=str(tmp_path / "kgc.log")) as kgc, \
            HealthyMember(kgc.bootstrap) as healthy:

        async def joined():
            while healthy.member.assignment is None:
                await asyncio.sleep(0.02)
            return healthy.member.assignment.generation
        generation = healthy.run(joined())
        rss_before = rss_bytes(kgc.proc.pid)
        sent = attack(kgc)
        print(f"\nfuzz: {sent} frames sent; healthy member generations {healthy.member.generations}; "
              f"kgc RSS {rss_before / 2**20:.1f} MiB before, {rss_bytes(kgc.proc.pid) / 2**20:.1f} MiB after")

        task = healthy.member._task
        assert task is not None and not task.done(), "the healthy member's heartbeat loop failed"
        assert healthy.member.assignment.generation == generation
        assert healthy.member.generations == [generation]
        assert kgc.proc.poll() is None
    # Nothing the attack sent was a fault inside kgc (an operation failing, a traceback).
    log = (tmp_path / "kgc.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]
