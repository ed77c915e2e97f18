"""Every transition of REFERENCE §3.1, and the moves the state table forbids."""

import pytest

from coordinator.group.classic.group import ClassicGroup
from coordinator.group.classic.state import VALID_PREVIOUS, GroupState, IllegalTransition
from coordinator.group.timer import join_key, sync_key
from tests.support.group_context import GroupTestContext

ALL = list(GroupState)


@pytest.mark.parametrize(("source", "target"), [(s, t) for t in ALL for s in ALL])
def test_transition_table(source, target):
    group = ClassicGroup("g", source, 0)
    if source in VALID_PREVIOUS[target]:
        group.transition_to(target, 42)
        assert (group.state, group.previous_state, group.current_state_timestamp_ms) == (target, source, 42)
    else:
        with pytest.raises(IllegalTransition):
            group.transition_to(target, 42)


def test_nothing_to_empty_by_a_first_join_writes_an_empty_group_record():
    ctx = GroupTestContext()
    ctx.join()
    assert ctx.state() == "Empty"
    [record] = ctx.written
    assert (record.value.protocol_type, record.value.generation, record.value.members) == ("", 0, ())


def test_nothing_to_empty_by_a_simple_commit():
    ctx = GroupTestContext()
    ctx.commit(generation_id=-1)
    assert ctx.state() == "Empty" and ctx.group().protocol_type is None


def test_empty_to_preparing_rebalance_when_the_first_member_is_added():
    ctx = GroupTestContext()
    ctx.join_dynamic()
    assert ctx.state() == "PreparingRebalance"
    assert ctx.group().previous_state is GroupState.EMPTY


def test_stable_to_preparing_rebalance_when_a_new_member_joins():
    ctx = GroupTestContext()
    ctx.stable_group(1)
    ctx.join_dynamic(client_id="new")
    assert ctx.state() == "PreparingRebalance"
    assert ctx.deadline_in(join_key("g")) == 5_000


def test_completing_rebalance_to_preparing_rebalance_when_a_member_expires():
    ctx = GroupTestContext()
    a, _ = ctx.join_dynamic(client_id="a", rebalance_timeout_ms=20_000)
    b, _ = ctx.join_dynamic(client_id="b", session_timeout_ms=6_000, rebalance_timeout_ms=20_000)
    ctx.finish_join_phase()
    ctx.sleep(6_000)                    # b's session ends before the 20 s pending-sync timer
    assert ctx.state() == "PreparingRebalance"
    assert b not in ctx.group().members
    assert not ctx.timer.is_scheduled(sync_key("g"))


def test_preparing_rebalance_to_completing_rebalance_when_everyone_rejoined():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ja = ctx.join(member_id=a, client_id="c0")
    jb = ctx.join(member_id=b, client_id="c1")
    assert ctx.state() == "CompletingRebalance"
    assert (ja.response.generation_id, jb.response.generation_id) == (2, 2)
    assert ctx.group().pending_sync_members == {a, b}


def test_preparing_rebalance_to_empty_when_nobody_is_left():
    # given a stable group whose only member leaves
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1)
    ctx.leave(members=[(m, None)])
    # then the join phase completes with no members: next generation, no protocol, record written
    assert ctx.state() == "Empty"
    group = ctx.group()
    assert (group.generation, group.protocol_name, group.protocol_type) == (2, None, "consumer")
    record = ctx.written[-1].value
    assert (record.generation, record.protocol, record.members, record.protocol_type) == (2, None, (), "consumer")


def test_completing_rebalance_to_stable_by_the_leader_sync():
    ctx = GroupTestContext()
    m, _ = ctx.join_dynamic()
    ctx.finish_join_phase()
    ctx.sync(member_id=m, assignments=[(m, b"x")])
    assert ctx.state() == "Stable"


def test_any_to_dead_when_the_group_is_deleted():
    ctx = GroupTestContext()
    ctx.commit(generation_id=-1)
    group = ctx.group()
    assert ctx.delete_groups("g") == [("g", 0)]
    assert group.state is GroupState.DEAD and "g" not in ctx.shard.groups


def test_any_to_dead_when_the_partition_unloads():
    ctx = GroupTestContext()
    ctx.stable_group(2)
    group = ctx.group()
    ctx.shard.on_unloaded()
    assert group.state is GroupState.DEAD
    assert ctx.shard.groups == {} and ctx.timer.keys() == set()
