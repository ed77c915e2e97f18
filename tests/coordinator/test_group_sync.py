"""SyncGroup: REFERENCE §2.3's SyncGroup rows (30 is not enforced; 16 is the runtime's)."""

import pytest

from coordinator.group.classic.state import GroupState
from coordinator.group.timer import sync_key
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

NONE, COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL = 0, 15, 22, 23
INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID = 24, 25, 27, 82


def completing(n=2):
    """A group whose join phase just completed: members parked nowhere, waiting to sync."""
    ctx = GroupTestContext()
    ids = [ctx.join_dynamic(client_id=f"c{i}")[0] for i in range(n)]
    ctx.finish_join_phase()
    return ctx, ids


def test_empty_group_id_is_invalid():
    assert GroupTestContext().sync(group_id="").error == INVALID_GROUP_ID


@pytest.mark.parametrize(("protocol_type", "protocol_name"), [(None, "range"), ("consumer", None)])
def test_v5_requires_protocol_type_and_name(protocol_type, protocol_name):
    ctx, (a, _) = completing()
    call = ctx.sync(version=5, member_id=a, protocol_type=protocol_type, protocol_name=protocol_name)
    assert call.error == INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize(("protocol_type", "protocol_name"), [("connect", "range"), ("consumer", "sticky")])
def test_protocol_type_or_name_different_from_the_group_is_inconsistent(protocol_type, protocol_name):
    ctx, (a, _) = completing()
    call = ctx.sync(version=5, member_id=a, protocol_type=protocol_type, protocol_name=protocol_name)
    assert call.error == INCONSISTENT_GROUP_PROTOCOL


def test_v4_does_not_check_protocol_names():
    ctx, (a, b) = completing()
    assert ctx.sync(version=4, member_id=b, protocol_name="sticky").response is None


def test_missing_group_is_unknown_member():
    assert GroupTestContext().sync(member_id="x").error == UNKNOWN_MEMBER_ID


def test_empty_group_is_unknown_member():
    ctx = GroupTestContext()
    ctx.commit(generation_id=-1)            # a simple (Empty) group
    assert ctx.state() == "Empty"
    assert ctx.sync(member_id="x", generation_id=0).error == UNKNOWN_MEMBER_ID


def test_unknown_member_and_unknown_instance_are_refused():
    ctx, (a, _) = completing()
    assert ctx.sync(member_id="ghost").error == UNKNOWN_MEMBER_ID
    assert ctx.sync(member_id=a, group_instance_id="nobody").error == UNKNOWN_MEMBER_ID


def test_instance_id_mapped_to_another_member_is_fenced():
    ctx = GroupTestContext()
    s = ctx.join(client_id="s", group_instance_id="inst")
    ctx.finish_join_phase()
    assert s.response.member_id == "inst-1"
    assert ctx.sync(member_id="other", group_instance_id="inst").error == FENCED_INSTANCE_ID


def test_wrong_generation_is_illegal():
    ctx, (a, _) = completing()
    assert ctx.sync(member_id=a, generation_id=2).error == ILLEGAL_GENERATION


def test_sync_while_preparing_rebalance_is_refused():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ctx.join(member_id=a, client_id="c0")
    assert ctx.state() == "PreparingRebalance"
    assert ctx.sync(member_id=b).error == REBALANCE_IN_PROGRESS


def test_dead_group_is_coordinator_not_available():
    ctx, (a, _) = completing()
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert ctx.sync(member_id=a).error == COORDINATOR_NOT_AVAILABLE


def test_leader_sync_answers_everyone_only_after_its_record_commits():
    # given two members waiting to sync, the follower parked
    ctx, (leader, follower) = completing()
    ctx.auto_commit = False
    f = ctx.sync(member_id=follower)
    assert f.response is None
    # when the leader syncs, leaving the follower's assignment out
    before = len(ctx.written)
    lead = ctx.sync(member_id=leader, assignments=[(leader, b"L")])
    # then a snapshot with both assignments is written, nobody is answered yet
    [record] = ctx.written[before:]
    assert {m.member_id: m.assignment for m in record.value.members} == {leader: b"L", follower: b""}
    assert (lead.response, f.response, ctx.state()) == (None, None, "CompletingRebalance")
    # and once it commits, both get their assignments and the group is Stable
    ctx.commit_pending()
    assert (lead.error, lead.response.assignment, f.response.assignment) == (NONE, b"L", b"")
    assert ctx.state() == "Stable"
    assert not ctx.timer.is_scheduled(sync_key("g"))


def test_v5_answers_carry_the_protocol_type_and_name():
    ctx, (leader, follower) = completing()
    f = ctx.sync(version=5, member_id=follower)
    ctx.sync(version=5, member_id=leader, assignments=[(leader, b"L"), (follower, b"F")])
    assert (f.response.protocol_type, f.response.protocol_name, f.response.assignment) == ("consumer", "range", b"F")


def test_assignment_committed_after_the_group_moved_on_is_not_handed_out():
    # given the leader's sync written but not yet committed
    ctx, (leader, follower) = completing()
    ctx.auto_commit = False
    ctx.sync(member_id=leader, assignments=[(leader, b"L"), (follower, b"F")])
    # when the follower rejoins with new metadata before the commit
    ctx.join(member_id=follower, client_id="c1", protocols=(("range", subscription("other")),))
    ctx.commit_pending()
    # then the group is rebalancing, and the leader was told so, not handed the stale assignment
    assert ctx.state() == "PreparingRebalance"
    assert ctx.group().member(leader).assignment == b""


def test_a_leader_that_leaves_while_its_assignment_is_written_is_answered():
    # given the leader's sync written but not yet durable (a slow store: the replicated one)
    ctx, (leader, follower) = completing()
    ctx.auto_commit = False
    f = ctx.sync(member_id=follower)
    lead = ctx.sync(member_id=leader, assignments=[(leader, b"L"), (follower, b"F")])
    # when the leader leaves the group (its consumer closes) before the write is durable
    ctx.leave(members=[(leader, None)])
    ctx.commit_pending()
    # then its parked SyncGroup is answered, not dropped: a closing Java consumer waits for
    # every request in flight to its coordinator, up to its close timeout; the follower is
    # told to rejoin
    assert lead.error == UNKNOWN_MEMBER_ID
    assert f.error == REBALANCE_IN_PROGRESS
    assert ctx.state() == "PreparingRebalance"


def test_a_member_whose_session_ends_while_it_waits_to_sync_is_answered():
    # given a follower parked in SyncGroup and a leader that never syncs
    ctx, (leader, follower) = completing()
    f = ctx.sync(member_id=follower)
    assert f.response is None
    # when the follower's session runs out (it heartbeats no more)
    ctx.sleep(ctx.group().member(follower).session_timeout_ms + 1)
    # then its SyncGroup is answered (the rebalance its expiry starts), so the client rejoins
    # instead of waiting out its request
    assert f.error == REBALANCE_IN_PROGRESS


def test_stable_member_gets_its_assignment_at_once():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    call = ctx.sync(member_id=b)
    assert (call.error, call.response.assignment) == (NONE, f"assign-{b}".encode())


def test_members_that_do_not_sync_within_the_rebalance_timeout_are_removed():
    # given a completed join phase where only the leader syncs
    ctx, (leader, follower) = completing()
    ctx.sync(member_id=leader, assignments=[(leader, b"L")])
    assert ctx.state() == "Stable"
    assert ctx.deadline_in(sync_key("g")) is not None
    ctx.heartbeat(member_id=leader)
    ctx.heartbeat(member_id=follower)
    # when the pending-sync timer fires (rebalance timeout after the join completed)
    ctx.sleep(ctx.deadline_in(sync_key("g")))
    # then the follower is gone and a new rebalance starts
    assert follower not in ctx.group().members
    assert ctx.state() == "PreparingRebalance"
