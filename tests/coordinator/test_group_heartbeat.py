"""Heartbeat and LeaveGroup: REFERENCE §2.3's rows (30 is not enforced; the loading-partition
Heartbeat row belongs to the runtime)."""

import pytest

from coordinator.group.classic.state import GroupState
from coordinator.group.timer import heartbeat_key
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

NONE, COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INVALID_GROUP_ID = 0, 15, 22, 24
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID = 25, 27, 82


def static_stable_group():
    ctx = GroupTestContext()
    s = ctx.join(client_id="s", group_instance_id="inst")
    ctx.finish_join_phase()
    member_id = s.response.member_id
    ctx.sync(member_id=member_id, group_instance_id="inst", assignments=[(member_id, b"A")])
    return ctx, member_id


# ---------------------------------------------------------------- Heartbeat


def test_heartbeat_with_empty_group_id_is_invalid():
    assert GroupTestContext().heartbeat(group_id="").error == INVALID_GROUP_ID


def test_heartbeat_for_missing_group_or_unknown_member_is_unknown_member():
    ctx = GroupTestContext()
    assert ctx.heartbeat(member_id="x").error == UNKNOWN_MEMBER_ID
    ctx.stable_group(1)
    assert ctx.heartbeat(member_id="x").error == UNKNOWN_MEMBER_ID


def test_heartbeat_to_an_empty_group_is_unknown_member():
    ctx = GroupTestContext()
    ctx.commit()
    assert ctx.heartbeat(member_id="x", generation_id=0).error == UNKNOWN_MEMBER_ID


def test_heartbeat_from_a_fenced_static_member():
    ctx, member_id = static_stable_group()
    ctx.join(client_id="s", group_instance_id="inst")     # the restarted process replaces it
    assert ctx.heartbeat(member_id=member_id, group_instance_id="inst").error == FENCED_INSTANCE_ID


def test_heartbeat_with_wrong_generation_is_illegal():
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1)
    assert ctx.heartbeat(member_id=m, generation_id=0).error == ILLEGAL_GENERATION


def test_heartbeat_while_preparing_rebalance_asks_to_rejoin_and_keeps_the_session():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ctx.join(member_id=a, client_id="c0")
    ctx.sleep(4_000)
    assert ctx.heartbeat(member_id=b).error == REBALANCE_IN_PROGRESS
    assert ctx.deadline_in(heartbeat_key("g", b)) == 10_000


@pytest.mark.parametrize("stable", [False, True])
def test_heartbeat_in_completing_rebalance_or_stable_is_fine_and_resets_the_session(stable):
    ctx = GroupTestContext()
    if stable:
        [m] = ctx.stable_group(1)
    else:
        m, _ = ctx.join_dynamic()
        ctx.finish_join_phase()
    ctx.sleep(3_000)
    assert ctx.heartbeat(member_id=m).error == NONE
    assert ctx.deadline_in(heartbeat_key("g", m)) == 10_000


def test_heartbeat_to_a_dead_group():
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1)
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert ctx.heartbeat(member_id=m).error == COORDINATOR_NOT_AVAILABLE


def test_missing_heartbeats_expire_the_member_and_the_group_rebalances():
    # B13's last step: B stops heartbeating
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ctx.sleep(9_000)
    ctx.heartbeat(member_id=a)
    ctx.sleep(1_000)                       # b's session (10 s) is over
    assert b not in ctx.group().members
    assert ctx.state() == "PreparingRebalance"
    assert ctx.heartbeat(member_id=a).error == REBALANCE_IN_PROGRESS
    rejoin = ctx.join(member_id=a, client_id="c0")
    assert (rejoin.error, rejoin.response.generation_id) == (NONE, 2)


def test_members_parked_in_a_join_do_not_expire_by_session():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2, session_timeout_ms=6_000, rebalance_timeout_ms=20_000)
    parked = ctx.join(member_id=a, client_id="c0", session_timeout_ms=6_000, rebalance_timeout_ms=20_000)
    ctx.sleep(6_000)                       # both sessions pass; b is not parked, a is
    assert a in ctx.group().members and b not in ctx.group().members
    assert (parked.error, parked.response.generation_id) == (NONE, 2)


# ---------------------------------------------------------------- LeaveGroup


def test_leave_with_empty_group_id_is_invalid():
    assert GroupTestContext().leave(group_id="", members=[("m", None)]).error == INVALID_GROUP_ID


@pytest.mark.parametrize("version", [0, 2])
def test_leave_v0_2_folds_the_member_error_into_the_top_level(version):
    ctx = GroupTestContext()
    ctx.stable_group(1)
    assert ctx.leave(version=version, members=[("ghost", None)]).error == UNKNOWN_MEMBER_ID


def test_leave_for_a_missing_group_gives_every_member_unknown_member():
    call = GroupTestContext().leave(members=[("a", None), ("", "i")])
    assert call.error == NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in call.response.members] == [
        ("a", None, UNKNOWN_MEMBER_ID), ("", "i", UNKNOWN_MEMBER_ID)]


def test_leave_for_a_missing_group_before_v3_is_a_top_level_unknown_member():
    assert GroupTestContext().leave(version=1, members=[("a", None)]).error == UNKNOWN_MEMBER_ID


def test_leave_from_a_dead_group():
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1)
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert ctx.leave(members=[(m, None)]).error == COORDINATOR_NOT_AVAILABLE


def test_batch_leave_reports_per_member_results():
    ctx, static_id = static_stable_group()
    call = ctx.leave(members=[("", "nobody"), ("ghost", None), ("other", "inst")])
    assert [m.error_code for m in call.response.members] == [UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID,
                                                              FENCED_INSTANCE_ID]
    assert static_id in ctx.group().members


def test_admin_removal_by_instance_id_without_member_id():
    ctx, static_id = static_stable_group()
    call = ctx.leave(members=[("", "inst")])
    assert [(m.member_id, m.error_code) for m in call.response.members] == [("", NONE)]
    # the last member left: the join phase completes with nobody and the group is Empty
    assert ctx.state() == "Empty"
    assert ctx.written[-1].value.members == () and ctx.written[-1].value.generation == 2


def test_pending_member_leaves_and_is_forgotten():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    pending = ctx.join().response.member_id
    call = ctx.leave(members=[(pending, None)])
    assert call.response.members[0].error_code == NONE
    assert pending not in ctx.group().pending_join_members
    assert not ctx.timer.is_scheduled(heartbeat_key("g", pending))
    # Kafka's code counts it as a successful leave, and a successful leave from a Stable
    # group starts a rebalance (REFERENCE §2.3 says "without rebalance"; the code rules).
    assert ctx.state() == "PreparingRebalance"


def test_member_leaving_a_stable_group_starts_a_rebalance():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ctx.leave(members=[(b, None)])
    assert ctx.state() == "PreparingRebalance"
    assert not ctx.timer.is_scheduled(heartbeat_key("g", b))


def test_last_missing_member_leaving_completes_the_join_phase():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    parked = ctx.join(member_id=a, client_id="c0", protocols=(("range", subscription("t", "u")),))
    ctx.leave(members=[(b, None)])
    assert (parked.error, parked.response.generation_id, parked.response.members[0].member_id) == (NONE, 2, a)
