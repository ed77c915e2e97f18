"""Thousands of malformed frames against `kgc serve` while a healthy member heartbeats.

Each malformed input arrives on its own connection; kgc must answer it or close that
connection, and the healthy member — on another connection — must never see an error,
a rebalance or a delay beyond its session timeout.

Two kinds of input: bytes (malformed, truncated, oversized frames) and schema-valid but
hostile requests (every group API kgc serves, at any version, with ids past what the
record format holds, repeated protocol names, extreme timeouts and offsets, thousands of
groups, keys or filter entries), each for a group other than the healthy member's.
`KGC_FUZZ_FRAMES=N` sets how many of each the run sends (the longer run in BENCHMARKS.md);
the run prints the frames sent and kgc's RSS before and after.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from tests.integration.aio_member import AioMember
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


HEALTHY_GROUP = "g-healthy"

# Ids and names as an attacker picks them: short, odd, or past the int16 records hold.
hostile_text = st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "\x00", "ü" * 20]),
                         st.integers(32_000, 40_000).map(lambda n: "x" * n))
group_ids = hostile_text.filter(lambda g: g != HEALTHY_GROUP)
int32s = st.integers(-2**31, 2**31 - 1)
int64s = st.integers(-2**63, 2**63 - 1)
many = st.integers(0, 3_000)
short_text = st.text(max_size=12)     # for lists of thousands: frames stay under the limit


def join(version, group, member, instance, protocol_type, names, session_ms, rebalance_ms):
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(version=version, group_id=group, session_timeout_ms=session_ms,
                            rebalance_timeout_ms=rebalance_ms, member_id=member, group_instance_id=instance,
                            protocol_type=protocol_type, protocols=[proto(name=n, metadata=b"\x00") for n in names],
                            reason=None)


def commit(version, group, member, generation, topics, partitions, offset, metadata):
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        version=version, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        group_instance_id=None, retention_time_ms=-1,
        topics=[topic_cls(name=t, partitions=[part_cls(partition_index=p, committed_offset=offset,
                                                       committed_leader_epoch=-1, committed_metadata=metadata)
                                              for p in range(partitions)]) for t in topics])


def fetch(version, group, topics):
    if version >= 8:
        g = OffsetFetchRequest.OffsetFetchRequestGroup
        t = g.OffsetFetchRequestTopics
        return OffsetFetchRequest(version=version, require_stable=False, groups=[
            g(group_id=group, topics=[t(name=n, partition_indexes=[0]) for n in topics])])
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(version=version, group_id=group, require_stable=False,
                              topics=[t(name=n, partition_indexes=[0]) for n in topics])


hostile_requests = st.one_of(
    st.builds(join, st.integers(0, 9), group_ids, hostile_text, st.none() | hostile_text, hostile_text,
              st.lists(hostile_text, max_size=4) | st.just(["range", "range"]), int32s, int32s),
    st.builds(lambda v, g, m, gen, inst: SyncGroupRequest(version=v, group_id=g, generation_id=gen, member_id=m,
                                                          group_instance_id=inst, protocol_type="consumer",
                                                          protocol_name="range", assignments=[]),
              st.integers(0, 5), group_ids, hostile_text, int32s, st.none() | hostile_text),
    st.builds(lambda v, g, m, gen: HeartbeatRequest(version=v, group_id=g, generation_id=gen, member_id=m,
                                                    group_instance_id=None),
              st.integers(0, 4), group_ids, hostile_text, int32s),
    st.builds(lambda v, g, m: LeaveGroupRequest(version=v, group_id=g, member_id=m, members=[
                  LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=None)]),
              st.integers(0, 5), group_ids, hostile_text),
    st.builds(commit, st.integers(2, 9), group_ids, hostile_text, int32s, st.lists(hostile_text, max_size=3),
              st.integers(0, 200), int64s, st.none() | hostile_text),
    st.builds(fetch, st.integers(1, 9), group_ids, st.lists(hostile_text, max_size=3)),
    st.builds(lambda v, n, g: DescribeGroupsRequest(version=v, groups=[f"{g}-{i}" for i in range(n)],
                                                    include_authorized_operations=True),
              st.integers(0, 5), many, short_text),
    st.builds(lambda v, n, s: ListGroupsRequest(version=v, states_filter=[s] * n, types_filter=[s]),
              st.integers(4, 5), many, short_text),
    st.builds(lambda v, g: DeleteGroupsRequest(version=v, groups_names=g),
              st.integers(0, 2), st.lists(group_ids, max_size=5)),
    st.builds(lambda n, g: FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=[g] * n),
              many, short_text),
)


def encoded(request) -> bytes | None:
    """The request's frame; None when its version cannot carry a value (a string past an
    int16 length in a non-flexible version): a client could not send it either."""
    request.with_header(correlation_id=7, client_id="fuzz")
    try:
        return bytes(request.encode(header=True, framed=True))
    except Exception:
        return None


def framed(kind: int, payload: bytes) -> bytes:
    if kind == 0:
        return struct.pack(">i", len(payload)) + payload
    if kind == 1:   # length says more than is sent (truncated)
        return struct.pack(">i", len(payload) + 10) + payload
    if kind == 2:   # absurd length: must be refused before allocation
        return struct.pack(">i", 2**31 - 1) + payload
    return struct.pack(">i", -len(payload) - 1) + payload


def send_and_drain(port: int, data: bytes, park_s: float = 5.0) -> None:
    """Send, then read until kgc closes; after `park_s` without a byte the request is
    parked (a JoinGroup waiting for its rebalance) and the connection is dropped, as a
    client that gives up would."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(park_s)
        try:
            while s.recv(65536):
                pass
        except TimeoutError:
            if park_s >= 5.0:
                raise


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
