"""OffsetCommit: REFERENCE §2.3's rows and §3.6/§3.8.

Not here: 3 (unknown topic/partition) is checked by the service against upstream
metadata; 29/30 (authorization) are not enforced yet; 35/113 apply to KIP-848 groups.
"""

import uuid

import pytest

from coordinator.group.classic.state import GroupState
from coordinator.group.timer import heartbeat_key
from coordinator.records import OffsetCommitKey, OffsetCommitValue
from tests.support import builders
from tests.support.group_context import GroupTestContext

NONE, OFFSET_METADATA_TOO_LARGE, COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION = 0, 12, 15, 22
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND, FENCED_INSTANCE_ID = 25, 27, 69, 82
UNKNOWN_TOPIC_ID = 100


def errors(call):
    return [(t.name, p.partition_index, p.error_code) for t in call.response.topics for p in t.partitions]


def test_simple_commit_with_generation_minus_one_creates_an_empty_group():
    ctx = GroupTestContext()
    call = ctx.commit(offsets=(("t", 0, 10, None), ("t", 1, 11, "m")))
    assert errors(call) == [("t", 0, NONE), ("t", 1, NONE)]
    assert ctx.state() == "Empty" and ctx.group().protocol_type is None
    assert [(r.key, r.value) for r in ctx.written] == [
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, -1, "", 1_000_000)),
        (OffsetCommitKey("g", "t", 1), OffsetCommitValue(11, -1, "m", 1_000_000))]


def test_empty_group_id_is_accepted_for_commits():
    ctx = GroupTestContext()
    assert errors(ctx.commit(group_id="")) == [("t", 0, NONE)]


@pytest.mark.parametrize(("version", "error"), [(8, ILLEGAL_GENERATION), (9, GROUP_ID_NOT_FOUND)])
def test_missing_group_with_a_generation_depends_on_the_version(version, error):
    ctx = GroupTestContext()
    call = ctx.commit(version=version, offsets=(("t", 0, 1, None), ("u", 3, 1, None)), member_id="m",
                      generation_id=1)
    assert errors(call) == [("t", 0, error), ("u", 3, error)]
    assert ctx.written == [] and "g" not in ctx.shard.groups


def test_member_and_generation_checks():
    ctx = GroupTestContext()
    a, _ = ctx.stable_group(2)
    assert errors(ctx.commit(member_id="ghost", generation_id=1)) == [("t", 0, UNKNOWN_MEMBER_ID)]
    assert errors(ctx.commit(member_id=a, generation_id=2)) == [("t", 0, ILLEGAL_GENERATION)]
    assert errors(ctx.commit(member_id=a, generation_id=1)) == [("t", 0, NONE)]
    # generation -1 with no member id is accepted only while the group is Empty
    assert errors(ctx.commit(generation_id=-1)) == [("t", 0, UNKNOWN_MEMBER_ID)]


def test_static_member_checks():
    ctx = GroupTestContext()
    s = ctx.join(client_id="s", group_instance_id="inst")
    ctx.finish_join_phase()
    member_id = s.response.member_id
    ctx.sync(member_id=member_id, group_instance_id="inst", assignments=[(member_id, b"")])
    commit = dict(version=7, generation_id=1)
    assert errors(ctx.commit(member_id=member_id, group_instance_id="nobody", **commit)) == [("t", 0, UNKNOWN_MEMBER_ID)]
    assert errors(ctx.commit(member_id="other", group_instance_id="inst", **commit)) == [("t", 0, FENCED_INSTANCE_ID)]
    assert errors(ctx.commit(member_id=member_id, group_instance_id="inst", **commit)) == [("t", 0, NONE)]


def test_commit_in_completing_rebalance_is_refused():
    ctx = GroupTestContext()
    m, _ = ctx.join_dynamic()
    ctx.finish_join_phase()
    assert errors(ctx.commit(member_id=m, generation_id=1)) == [("t", 0, REBALANCE_IN_PROGRESS)]


def test_commit_with_the_old_generation_is_accepted_while_preparing_rebalance():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ctx.join(member_id=a, client_id="c0")
    assert ctx.state() == "PreparingRebalance"
    assert errors(ctx.commit(member_id=b, generation_id=1)) == [("t", 0, NONE)]


def test_commit_to_a_dead_group():
    ctx = GroupTestContext()
    ctx.commit()
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert errors(ctx.commit()) == [("t", 0, COORDINATOR_NOT_AVAILABLE)]


def test_commit_counts_as_a_heartbeat_in_stable():
    ctx = GroupTestContext()
    a, _ = ctx.stable_group(2)
    ctx.sleep(8_000)
    ctx.commit(member_id=a, generation_id=1)
    assert ctx.deadline_in(heartbeat_key("g", a)) == 10_000


@pytest.mark.parametrize(("metadata", "max_bytes", "error"), [
    ("x" * 10, 10, NONE),
    ("x" * 11, 10, OFFSET_METADATA_TOO_LARGE),
    ("😀" * 5, 10, NONE),                        # 5 characters, 10 UTF-16 units, 20 UTF-8 bytes
    ("😀" * 5 + "x", 10, OFFSET_METADATA_TOO_LARGE),
    ("é" * 10, 10, NONE),                        # 20 UTF-8 bytes, but 10 UTF-16 units
])
def test_metadata_size_is_measured_in_utf16_units_per_partition(metadata, max_bytes, error):
    ctx = GroupTestContext(offset_metadata_max_bytes=max_bytes)
    call = ctx.commit(offsets=(("t", 0, 1, metadata), ("t", 1, 2, "ok")))
    assert errors(call) == [("t", 0, error), ("t", 1, NONE)]
    assert [r.key.partition for r in ctx.written] == ([0, 1] if error == NONE else [1])


@pytest.mark.parametrize(("version", "retention_ms", "expire_ms"), [
    (2, 60_000, 1_060_000), (4, 60_000, 1_060_000), (4, -1, -1), (5, 60_000, -1)])
def test_explicit_retention_of_v2_to_v4_sets_an_expire_timestamp(version, retention_ms, expire_ms):
    ctx = GroupTestContext()
    ctx.commit(version=version, retention_time_ms=retention_ms)
    assert ctx.written[0].value.expire_timestamp_ms == expire_ms


@pytest.mark.parametrize(("version", "epoch"), [(5, -1), (6, 9)])
def test_leader_epoch_is_kept_from_v6(version, epoch):
    ctx = GroupTestContext()
    ctx.commit(version=version, leader_epoch=9)
    assert ctx.written[0].value.leader_epoch == epoch


def test_records_carry_who_committed():
    ctx = GroupTestContext()
    a, _ = ctx.stable_group(2)
    ctx.commit(member_id=a, generation_id=1)
    assert dict(ctx.written[-1].headers) == {"member_id": a.encode(), "generation": b"1", "client_id": b"client",
                                             "client_host": b"/127.0.0.1"}


def test_v10_topic_without_a_resolved_name_is_an_unknown_topic_id():
    ctx = GroupTestContext()
    request = builders.commit_request(10)
    request.topics[0].topic_id = uuid.uuid4()
    result = ctx.shard.commit_offsets(ctx.rctx(10), request)
    assert result.records == ()
    assert result.response.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_ID
    request.topics[0].name = "t"                     # what the service does once it knows the id
    assert ctx.shard.commit_offsets(ctx.rctx(10), request).records[0].key == OffsetCommitKey("g", "t", 0)


# ---- the versions Kafka 4.0 removed (KIP-896), served as Kafka 3.9 served them

def test_v1_stores_each_partitions_commit_timestamp_and_the_coordinators_time_for_minus_one():
    ctx = GroupTestContext()
    a, _ = ctx.stable_group(2)
    now = ctx.clock.now_ms()
    call = ctx.commit(version=1, member_id=a, generation_id=1,
                      offsets=(("t", 0, 10, None), ("t", 1, 11, "m"), ("u", 0, 12, None), ("t", 0, 13, None)),
                      commit_timestamps={("t", 0): 500, ("u", 0): 2_000_000})
    assert errors(call) == [("t", 0, NONE), ("t", 1, NONE), ("t", 0, NONE), ("u", 0, NONE)]
    assert [(r.key.topic, r.key.partition, r.value) for r in ctx.written[-4:]] == [
        ("t", 0, OffsetCommitValue(10, -1, "", 500)),
        ("t", 1, OffsetCommitValue(11, -1, "m", now)),
        ("t", 0, OffsetCommitValue(13, -1, "", 500)),
        ("u", 0, OffsetCommitValue(12, -1, "", 2_000_000))]
    assert ctx.fetch(topics=[("t", [0])]).topics[0].partitions[0].offset == 13   # the last one listed wins
    assert dict(ctx.written[-1].headers)["member_id"] == a.encode()


def test_v1_checks_member_and_generation_as_later_versions_do():
    ctx = GroupTestContext()
    a, _ = ctx.stable_group(2)
    assert errors(ctx.commit(version=1, member_id="ghost", generation_id=1)) == [("t", 0, UNKNOWN_MEMBER_ID)]
    assert errors(ctx.commit(version=1, member_id=a, generation_id=2)) == [("t", 0, ILLEGAL_GENERATION)]
    assert errors(ctx.commit(version=1, generation_id=5)) == [("t", 0, UNKNOWN_MEMBER_ID)]


def test_v0_is_a_commit_outside_any_generation():
    """v0 has no generation or member: stored like any commit with generation -1 (Kafka
    kept v0 commits in ZooKeeper; kgc has one store), so it is refused while the group
    has members, which a v0 client cannot prove to be."""
    ctx = GroupTestContext()
    assert errors(ctx.commit(version=0, offsets=(("t", 0, 10, "m"),))) == [("t", 0, NONE)]
    assert [(r.key, r.value) for r in ctx.written] == [
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, -1, "m", 1_000_000))]
    assert dict(ctx.written[0].headers)["generation"] == b"-1"
    assert ctx.state() == "Empty" and ctx.fetch(version=1).topics[0].partitions[0].offset == 10
    other = GroupTestContext()
    other.stable_group(2)
    before = len(other.written)
    assert errors(other.commit(version=0)) == [("t", 0, UNKNOWN_MEMBER_ID)]
    assert len(other.written) == before
