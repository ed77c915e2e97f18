"""Loading: the records a shard wrote, replayed into a fresh shard, give back its groups."""

import pytest

from coordinator.group.errors import CorruptStateError
from coordinator.group.timer import expire_offsets_key, heartbeat_key
from coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from tests.support.group_context import GroupTestContext


def test_replayed_log_gives_stable_and_empty_groups_with_generation_assignment_and_offsets():
    # given a stable group with offsets, an emptied group, and a simple group
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2, group_id="live")
    ctx.commit(group_id="live", member_id=a, generation_id=1, offsets=(("t", 0, 42, "meta"),), leader_epoch=3)
    [m] = ctx.stable_group(1, group_id="gone")
    ctx.leave(group_id="gone", members=[(m, None)])
    ctx.commit(group_id="simple", offsets=(("u", 1, 7, None),))
    # when the log is replayed into a fresh shard
    loaded = ctx.reload()
    # then the groups are back as Stable / Empty with what was persisted
    live = loaded.group("live")
    assert (live.state.value, live.generation, live.protocol_name, live.leader_id) == ("Stable", 1, "range", a)
    assert {x.member_id: x.assignment for x in live.members.values()} == {
        a: f"assign-{a}".encode(), b: f"assign-{b}".encode()}
    assert (loaded.state("gone"), loaded.group("gone").generation) == ("Empty", 2)
    assert (loaded.state("simple"), loaded.group("simple").protocol_type) == ("Empty", None)
    fetched = loaded.fetch("live", [("t", [0])]).topics[0].partitions[0]
    assert (fetched.offset, fetched.leader_epoch, fetched.metadata) == (42, 3, "meta")
    assert loaded.fetch("simple").topics[0].partitions[0].offset == 7
    # and every loaded member gets a fresh session, and the expiry job is armed
    assert loaded.deadline_in(heartbeat_key("live", a)) == 10_000
    assert loaded.timer.is_scheduled(expire_offsets_key())


def test_loaded_stable_members_continue_without_a_rebalance():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    loaded = ctx.reload()
    assert loaded.heartbeat(member_id=b, generation_id=1).error == 0
    assert loaded.sync(member_id=b, generation_id=1).response.assignment == f"assign-{b}".encode()
    assert loaded.join(member_id=b, client_id="c1").response.generation_id == 1


def test_loaded_members_that_never_come_back_expire():
    ctx = GroupTestContext()
    ctx.stable_group(2)
    loaded = ctx.reload()
    loaded.sleep(10_000)
    # the first expiry starts a rebalance, the second leaves nobody: the group empties
    assert (loaded.state(), loaded.group().generation, loaded.group().members) == ("Empty", 2, {})
    assert loaded.written[-1].value.members == ()


def test_tombstone_for_a_group_with_members_is_corrupt_state_unless_an_upgrade_follows():
    # Only an online upgrade to a consumer group deletes a group with members, and the
    # consumer group's records follow the tombstone at once.
    ctx = GroupTestContext()
    ctx.stable_group(1)
    ctx.shard.replay(99, CoordinatorRecord(GroupMetadataKey("g"), None))
    with pytest.raises(CorruptStateError):
        ctx.shard.replay(100, CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", 0, -1)))
    ended = GroupTestContext()
    ended.stable_group(1)
    ended.shard.replay(99, CoordinatorRecord(GroupMetadataKey("g"), None))
    with pytest.raises(CorruptStateError):
        ended.shard.on_loaded()


def test_group_record_whose_leader_is_not_a_member_is_corrupt_state():
    member = MemberMetadata("m", None, "c", "/h", 1, 1, b"", b"")
    value = GroupMetadataValue("consumer", 1, "range", "other", 0, (member,))
    with pytest.raises(CorruptStateError):
        GroupTestContext().shard.replay(0, CoordinatorRecord(GroupMetadataKey("g"), value))


def test_rebalance_timeout_minus_one_loads_as_the_session_timeout():
    member = MemberMetadata("m", None, "c", "/h", -1, 7_000, b"", b"")
    ctx = GroupTestContext()
    ctx.shard.replay(0, CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m", 0,
                                                                                     (member,))))
    assert ctx.group().member("m").rebalance_timeout_ms == 7_000
