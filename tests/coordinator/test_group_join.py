"""JoinGroup: every row of REFERENCE §2.3's JoinGroup table, two-step and static joins.

Not covered here: GROUP_AUTHORIZATION_FAILED (30; kgc does not authorize yet) and the
common-mapping rows 14/15/16 of a loading/unloaded partition (the runtime's job).
"""

import pytest

from coordinator.group.classic.state import GroupState
from coordinator.group.timer import heartbeat_key, join_key, sync_key
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

NONE, COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL = 0, 15, 22, 23
INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS = 24, 25, 26, 27
MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID = 79, 81, 82


def test_empty_group_id_is_invalid():
    ctx = GroupTestContext()
    call = ctx.join(group_id="", member_id="m")
    assert (call.error, call.response.member_id) == (INVALID_GROUP_ID, "m")
    assert ctx.written == []


@pytest.mark.parametrize("session_timeout_ms", [5_999, 1_800_001])
def test_session_timeout_outside_the_configured_bounds_is_refused(session_timeout_ms):
    ctx = GroupTestContext()
    assert ctx.join(session_timeout_ms=session_timeout_ms).error == INVALID_SESSION_TIMEOUT
    assert "g" not in ctx.shard.groups


@pytest.mark.parametrize(("protocol_type", "protocols"), [("", (("range", b""),)), ("consumer", ())])
def test_first_member_needs_a_protocol_type_and_a_protocol(protocol_type, protocols):
    ctx = GroupTestContext()
    call = ctx.join(protocol_type=protocol_type, protocols=protocols)
    assert (call.error, call.response.member_id) == (INCONSISTENT_GROUP_PROTOCOL, "")


@pytest.mark.parametrize(("protocol_type", "protocols"), [
    ("connect", (("range", b""),)),            # another protocol type
    ("consumer", (("sticky", b""),)),          # no protocol every member supports
])
def test_joiner_must_match_the_group_protocol_type_and_share_a_protocol(protocol_type, protocols):
    ctx = GroupTestContext()
    ctx.stable_group(1)
    assert ctx.join(protocol_type=protocol_type, protocols=protocols).error == INCONSISTENT_GROUP_PROTOCOL


def test_v4_dynamic_member_must_first_get_a_member_id():
    # given a brand-new group
    ctx = GroupTestContext()
    # when a dynamic member joins without an id
    call = ctx.join(version=4, client_id="app")
    # then it gets MEMBER_ID_REQUIRED and an id, is pending, and the new group is written
    assert (call.error, call.response.member_id) == (MEMBER_ID_REQUIRED, "app-1")
    assert ctx.group().pending_join_members == {"app-1"}
    assert ctx.state() == "Empty"
    assert [r.value.generation for r in ctx.written] == [0]
    assert ctx.deadline_in(heartbeat_key("g", "app-1")) == 10_000
    # and rejoining with the id parks the member in PreparingRebalance
    again = ctx.join(version=4, client_id="app", member_id="app-1")
    assert again.response is None
    assert ctx.state() == "PreparingRebalance"
    assert ctx.group().member("app-1").is_awaiting_join


def test_pending_member_id_expires_after_the_request_session_timeout():
    ctx = GroupTestContext()
    member_id = ctx.join(session_timeout_ms=7_000).response.member_id
    assert ctx.sleep(7_000) == [heartbeat_key("g", member_id)]
    assert ctx.group().pending_join_members == set()
    assert ctx.join(member_id=member_id, session_timeout_ms=7_000).error == UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_before_v4_a_dynamic_member_is_added_at_once(version):
    ctx = GroupTestContext()
    call = ctx.join(version=version, client_id="old")
    assert call.response is None
    assert list(ctx.group().members) == ["old-1"]
    ctx.finish_join_phase()
    assert (call.error, call.response.member_id, call.response.generation_id) == (NONE, "old-1", 1)
    assert call.response.protocol_name == "range"


def test_v0_join_uses_the_session_timeout_as_rebalance_timeout():
    ctx = GroupTestContext()
    ctx.join(version=0, session_timeout_ms=8_000)
    assert ctx.group().member("client-1").rebalance_timeout_ms == 8_000


def test_member_id_for_a_missing_group_is_unknown():
    ctx = GroupTestContext()
    call = ctx.join(member_id="ghost")
    assert (call.error, call.response.member_id) == (UNKNOWN_MEMBER_ID, "ghost")
    assert ctx.shard.groups == {} and ctx.written == []


def test_unknown_member_of_an_existing_group_is_refused():
    ctx = GroupTestContext()
    ctx.stable_group(1)
    assert ctx.join(member_id="ghost").error == UNKNOWN_MEMBER_ID


def test_unknown_static_instance_with_a_member_id_is_refused():
    ctx = GroupTestContext()
    ctx.stable_group(1)
    assert ctx.join(member_id="ghost", group_instance_id="nobody").error == UNKNOWN_MEMBER_ID


def test_instance_id_held_by_another_member_id_is_fenced():
    ctx = GroupTestContext()
    ctx.join(group_instance_id="i1", client_id="a")
    ctx.finish_join_phase()
    assert ctx.join(member_id="someone-else", group_instance_id="i1").error == FENCED_INSTANCE_ID


def test_new_member_join_timeout_answers_the_parked_join_and_removes_the_member():
    # given a stable member and a new member parked in a rebalance that never completes
    ctx = GroupTestContext(new_member_join_timeout_ms=300_000)
    [leader] = ctx.stable_group(1, rebalance_timeout_ms=600_000, session_timeout_ms=600_000)
    newcomer, parked = ctx.join_dynamic(client_id="n", rebalance_timeout_ms=600_000)
    assert ctx.state() == "PreparingRebalance"
    # when the new-member join timeout passes (the leader keeps its session alive)
    ctx.heartbeat(member_id=leader, generation_id=1)
    ctx.sleep(300_000)
    # then the newcomer is answered UNKNOWN_MEMBER_ID and dropped, though it was awaiting join
    assert (parked.error, parked.response.member_id) == (UNKNOWN_MEMBER_ID, "")
    assert newcomer not in ctx.group().members


def test_group_dead_answers_coordinator_not_available():
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1)
    ctx.group().transition_to(GroupState.DEAD, 0)
    assert ctx.join(member_id=m).error == COORDINATOR_NOT_AVAILABLE
    assert ctx.join().error == COORDINATOR_NOT_AVAILABLE


def test_group_max_size_refuses_new_members_in_stable():
    ctx = GroupTestContext(group_max_size=2)
    ctx.stable_group(2)
    call = ctx.join()
    assert (call.error, call.response.member_id) == (GROUP_MAX_SIZE_REACHED, "")


def test_group_max_size_counts_members_awaiting_join_while_preparing():
    # given a full group that is rebalancing, with only the leader rejoined
    ctx = GroupTestContext(group_max_size=2)
    a, b = ctx.stable_group(2)
    ctx.join(member_id=a, client_id="c0")
    # when a newcomer joins while one member awaits join (1 < 2: accepted)
    first = ctx.join()
    assert first.error == MEMBER_ID_REQUIRED
    second = ctx.join(member_id=first.response.member_id)
    assert second.response is None                 # now a and the newcomer await join
    # then the old member b, rejoining last, is the one kicked out
    late = ctx.join(member_id=b, client_id="c1")
    assert late.error == GROUP_MAX_SIZE_REACHED
    assert b not in ctx.group().members


def test_protocol_is_chosen_by_vote_among_protocols_every_member_supports():
    ctx = GroupTestContext()
    sub = subscription("t")
    _, a = ctx.join_dynamic(client_id="a", protocols=(("roundrobin", sub), ("range", sub), ("sticky", sub)))
    _, b = ctx.join_dynamic(client_id="b", protocols=(("range", sub), ("roundrobin", sub)))
    _, c = ctx.join_dynamic(client_id="c", protocols=(("range", sub), ("roundrobin", sub)))
    ctx.finish_join_phase()
    # sticky is not supported by all; range gets two votes, roundrobin one
    assert {x.response.protocol_name for x in (a, b, c)} == {"range"}


def test_only_the_leader_gets_the_member_list():
    ctx = GroupTestContext()
    a, ja = ctx.join_dynamic(client_id="a")
    b, jb = ctx.join_dynamic(client_id="b")
    ctx.finish_join_phase()
    assert ja.response.leader == jb.response.leader == a
    assert [x.member_id for x in ja.response.members] == [a, b]
    assert jb.response.members == []
    assert ja.response.members[0].metadata == subscription("t")


def test_leader_that_does_not_rejoin_is_replaced_by_a_member_that_did():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    # b rejoins with new metadata; the leader a never rejoins
    call = ctx.join(member_id=b, client_id="c1", protocols=(("range", subscription("t", "u")),))
    assert ctx.state() == "PreparingRebalance"
    ctx.sleep(5_000)   # the join phase deadline (rebalance timeout)
    assert (call.error, call.response.leader, call.response.generation_id) == (NONE, b, 2)
    assert list(ctx.group().members) == [b]


def test_rejoin_in_completing_rebalance_with_same_metadata_gets_the_generation_again():
    ctx = GroupTestContext()
    a, ja = ctx.join_dynamic(client_id="a")
    ctx.finish_join_phase()
    again = ctx.join(member_id=a, client_id="a")
    assert again.response.generation_id == ja.response.generation_id == 1
    assert [x.member_id for x in again.response.members] == [a]
    assert ctx.state() == "CompletingRebalance"


def test_rejoin_in_completing_rebalance_with_new_metadata_rebalances():
    ctx = GroupTestContext()
    a, _ = ctx.join_dynamic(client_id="a")
    b, _ = ctx.join_dynamic(client_id="b")
    ctx.finish_join_phase()
    call = ctx.join(member_id=a, client_id="a", protocols=(("range", subscription("x")),))
    assert call.response is None
    assert ctx.state() == "PreparingRebalance"
    ctx.join(member_id=b, client_id="b")
    assert (call.error, call.response.generation_id) == (NONE, 2)


def test_follower_sync_is_cancelled_with_rebalance_in_progress_when_a_new_rebalance_starts():
    ctx = GroupTestContext()
    a, _ = ctx.join_dynamic(client_id="a")
    b, _ = ctx.join_dynamic(client_id="b")
    ctx.finish_join_phase()
    follower = ctx.sync(member_id=b, generation_id=1)
    assert follower.response is None
    rejoin = ctx.join(member_id=b, client_id="b", protocols=(("range", subscription("x")),))
    assert follower.error == REBALANCE_IN_PROGRESS
    assert rejoin.response is None and ctx.state() == "PreparingRebalance"
    assert not ctx.timer.is_scheduled(sync_key("g"))


def test_stable_follower_with_unchanged_metadata_gets_the_current_generation_without_rebalance():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    call = ctx.join(member_id=b, client_id="c1")
    assert (call.error, call.response.generation_id, call.response.leader) == (NONE, 1, a)
    assert call.response.members == []
    assert ctx.state() == "Stable"


def test_stable_leader_rejoining_triggers_a_rebalance():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    call = ctx.join(member_id=a, client_id="c0")
    assert call.response is None
    assert ctx.state() == "PreparingRebalance"
    assert ctx.deadline_in(join_key("g")) == 5_000


def test_initial_delay_is_extended_while_members_arrive_up_to_the_rebalance_timeout():
    # rebalance timeout 10 s, initial delay 3 s
    ctx = GroupTestContext(initial_rebalance_delay_ms=3_000)
    _, a = ctx.join_dynamic(client_id="a", rebalance_timeout_ms=10_000)
    assert ctx.deadline_in(join_key("g")) == 3_000
    ctx.sleep(2_000)
    _, b = ctx.join_dynamic(client_id="b", rebalance_timeout_ms=10_000)
    assert ctx.sleep(1_000) == [join_key("g")]           # first delay ends: a member came, extend
    assert a.response is None and ctx.deadline_in(join_key("g")) == 3_000
    ctx.sleep(1_000)
    _, c = ctx.join_dynamic(client_id="c", rebalance_timeout_ms=10_000)
    ctx.sleep(2_000)                                      # second delay ends: extend by min(3 s, 4 s)
    assert a.response is None and ctx.deadline_in(join_key("g")) == 3_000
    ctx.sleep(3_000)                                      # nobody new: complete
    assert {x.response.generation_id for x in (a, b, c)} == {1}
    assert ctx.state() == "CompletingRebalance"


def test_initial_rebalance_never_completes_early_even_when_everyone_joined():
    ctx = GroupTestContext(initial_rebalance_delay_ms=3_000)
    _, a = ctx.join_dynamic(client_id="a")
    assert a.response is None
    ctx.sleep(2_999)
    assert a.response is None
    ctx.sleep(1)
    assert a.error == NONE


def test_join_phase_deadline_removes_dynamic_members_that_did_not_rejoin_but_keeps_static_ones():
    ctx = GroupTestContext()
    d, _ = ctx.join_dynamic(client_id="d", session_timeout_ms=60_000)
    s = ctx.join(client_id="s", group_instance_id="inst", session_timeout_ms=60_000)
    ctx.finish_join_phase()
    static_id = s.response.member_id
    leader = d if s.response.leader == d else static_id
    ctx.sync(member_id=d, generation_id=1, assignments=[(d, b"1"), (static_id, b"2")] if leader == d else ())
    ctx.sync(member_id=static_id, generation_id=1, group_instance_id="inst",
             assignments=[(d, b"1"), (static_id, b"2")] if leader == static_id else ())
    assert ctx.state() == "Stable"
    # a third member joins; neither d nor the static member rejoin
    _, newcomer = ctx.join_dynamic(client_id="n")
    ctx.sleep(5_000)
    assert newcomer.error == NONE
    assert set(ctx.group().members) == {static_id, newcomer.response.member_id}


def test_join_phase_with_nobody_rejoined_waits_another_rebalance_timeout():
    # given a stable group of two static members, over group.max.size after a reload
    ctx = GroupTestContext()
    a = ctx.join(client_id="a", group_instance_id="ia", session_timeout_ms=60_000)
    b = ctx.join(client_id="b", group_instance_id="ib", session_timeout_ms=60_000)
    ctx.finish_join_phase()
    ids = [a.response.member_id, b.response.member_id]
    leader = a.response.leader
    for mid, inst in zip(ids, ["ia", "ib"], strict=True):
        ctx.sync(member_id=mid, group_instance_id=inst, generation_id=1,
                 assignments=[(x, b"") for x in ids] if mid == leader else ())
    loaded = ctx.reload(group_max_size=1)  # 2 members > max size 1: forced rebalance
    assert loaded.state() == "PreparingRebalance"
    # when nobody rejoins before the join deadline
    loaded.sleep(5_000)
    # then static members stay and the coordinator waits another rebalance timeout
    assert loaded.state() == "PreparingRebalance"
    assert set(loaded.group().members) == set(ids)
    assert loaded.deadline_in(join_key("g")) == 5_000


def test_static_member_rejoining_stable_group_without_protocol_change_replaces_without_rebalance():
    # given a stable group of a static leader and a dynamic follower
    ctx = GroupTestContext()
    first = ctx.join(client_id="x", group_instance_id="inst")
    ctx.finish_join_phase()
    old_id = first.response.member_id
    ctx.sync(member_id=old_id, group_instance_id="inst", generation_id=1, assignments=[(old_id, b"A")])
    written_before = len(ctx.written)
    # when the static member restarts and joins with no member id (v5: no SkipAssignment)
    call = ctx.join(client_id="x", group_instance_id="inst")
    new_id = "inst-2"
    # then it replaces the old id, keeps generation and assignment, and a snapshot is written
    assert ctx.state() == "Stable"
    assert (call.error, call.response.member_id, call.response.generation_id) == (NONE, new_id, 1)
    assert call.response.leader == old_id            # pre-v9: shown the old leader, acts as follower
    assert list(ctx.group().members) == [new_id] and ctx.group().leader_id == new_id
    assert ctx.group().member(new_id).assignment == b"A"
    assert ctx.written[written_before].value.members[0].member_id == new_id
    assert ctx.written[written_before].value.members[0].assignment == b"A"
    # and the old process is fenced
    assert ctx.heartbeat(member_id=old_id, group_instance_id="inst", generation_id=1).error == FENCED_INSTANCE_ID
    assert ctx.sync(member_id=new_id, group_instance_id="inst", generation_id=1).response.assignment == b"A"


def test_static_leader_rejoining_with_v9_gets_skip_assignment_and_the_member_list():
    ctx = GroupTestContext()
    first = ctx.join(version=9, client_id="x", group_instance_id="inst")
    ctx.finish_join_phase()
    old_id = first.response.member_id
    ctx.sync(version=5, member_id=old_id, group_instance_id="inst", generation_id=1, assignments=[(old_id, b"A")])
    call = ctx.join(version=9, client_id="x", group_instance_id="inst")
    assert call.response.skip_assignment is True
    assert call.response.leader == call.response.member_id
    assert [m.group_instance_id for m in call.response.members] == ["inst"]


def test_static_replacement_answers_only_after_the_snapshot_commits():
    ctx = GroupTestContext()
    first = ctx.join(client_id="x", group_instance_id="inst")
    ctx.finish_join_phase()
    ctx.sync(member_id=first.response.member_id, group_instance_id="inst", generation_id=1)
    ctx.auto_commit = False
    call = ctx.join(client_id="x", group_instance_id="inst")
    assert call.response is None
    ctx.commit_pending()
    assert call.error == NONE


def test_static_member_rejoining_with_a_protocol_change_triggers_a_rebalance():
    ctx = GroupTestContext()
    first = ctx.join(client_id="x", group_instance_id="inst")
    ctx.finish_join_phase()
    ctx.sync(member_id=first.response.member_id, group_instance_id="inst", generation_id=1)
    sub = subscription("t")
    call = ctx.join(client_id="x", group_instance_id="inst", protocols=(("sticky", sub), ("range", sub)))
    # the only member has rejoined, so the rebalance completes at once
    assert ctx.state() == "CompletingRebalance"
    assert (call.error, call.response.protocol_name, call.response.generation_id) == (NONE, "sticky", 2)


def test_static_member_rejoining_during_completing_rebalance_forces_a_rebalance_and_fences_the_old_sync():
    ctx = GroupTestContext()
    a = ctx.join(client_id="a", group_instance_id="ia")
    b = ctx.join(client_id="b", group_instance_id="ib")
    ctx.finish_join_phase()
    b_id = b.response.member_id
    parked = ctx.sync(member_id=b_id, group_instance_id="ib", generation_id=1)
    assert parked.response is None
    again = ctx.join(client_id="b", group_instance_id="ib")
    assert parked.error == FENCED_INSTANCE_ID
    assert again.response is None and ctx.state() == "PreparingRebalance"
    ctx.join(member_id=a.response.member_id, group_instance_id="ia", client_id="a")
    assert again.error == NONE and again.response.generation_id == 2


def test_leave_cancels_a_parked_join_with_unknown_member_id():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    parked = ctx.join(member_id=b, client_id="c1", protocols=(("range", subscription("z")),))
    ctx.leave(members=[(b, None)])
    assert parked.error == UNKNOWN_MEMBER_ID

