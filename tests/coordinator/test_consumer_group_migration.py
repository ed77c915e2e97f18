"""Online migration between the classic and the KIP-848 protocol, on a manual clock: a
classic group with members upgraded when a ConsumerGroupHeartbeat joins it, classic
members served inside the consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), and
the downgrade when the last consumer-protocol member leaves; under each migration policy,
and across a reload of the log."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from coordinator.group.timer import classic_join_key, classic_sync_key, session_key
from coordinator.http.groups import detail
from coordinator.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
)
from protocol.errors import ApiError, ErrorCode
from tests.support import builders
from tests.support.group_context import GroupTestContext
from tests.support.group_scenarios import (
    PROTOCOLS,
    assignment_bytes,
    classic_group,
    owners_are_unique,
    rejoin,
)

E = ErrorCode
SESSION_MS = builders.SESSION_TIMEOUT_MS


def assigned(sync_call) -> set[int]:
    decoded = ConsumerProtocolAssignment.decode(sync_call.response.assignment)
    return {p for tp in decoded.assigned_partitions for p in tp.partitions}


def release_revoked(ctx: GroupTestContext, member_id: str, instance_id: str | None = None) -> set[int]:
    """The consumer member at epoch 1, which owned all of t, hears what it keeps and
    acknowledges the revocation by owning only that; returns what it kept."""
    kept = ctx.consumer_heartbeat(member_id=member_id, instance_id=instance_id, member_epoch=1,
                                  owned={"t": {0, 1, 2, 3}}).assignment["t"]
    ctx.consumer_heartbeat(member_id=member_id, instance_id=instance_id, member_epoch=1, owned={"t": kept})
    return kept


@pytest.fixture
def ctx() -> GroupTestContext:
    context = GroupTestContext(consumer_session_timeout_ms=45_000)
    context.set_topics(t=4)
    return context


# ---------------------------------------------------------------- upgrade


def test_the_first_consumer_protocol_member_upgrades_a_classic_group_with_members(ctx):
    a, b = classic_group(ctx)
    written = len(ctx.written)
    call = ctx.consumer_heartbeat(member_id="c")
    assert call.error == 0 and "g" not in ctx.shard.groups
    group = ctx.consumer_group()
    # The conversion's records in Kafka's order, then the joiner's heartbeat.
    kinds = [type(r.key).__name__ for r in ctx.written[written:written + 9]]
    assert kinds == ["GroupMetadataKey", "ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataKey",
                     "ConsumerGroupMetadataKey", "ConsumerGroupTargetAssignmentMemberKey",
                     "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMetadataKey",
                     "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentKey"]
    assert ctx.written[written].value is None
    assert ctx.written[written + 3].value.epoch == 1 and ctx.written[written + 6].value.assignment_epoch == 1
    # The classic members keep their partitions and what they joined with.
    assert group.members[a].assigned == {builders.topic_id("t"): frozenset({0, 2})}
    assert group.members[a].classic == ClassicMemberMetadata(SESSION_MS, PROTOCOLS)
    # The joiner is at the new epoch, waiting for partitions the classic members still hold.
    assert (call.epoch, call.assignment, group.group_epoch) == (2, {}, 2)
    owners_are_unique(ctx)
    # Their session is the classic one.
    assert ctx.deadline_in(session_key("g", a)) == SESSION_MS
    # /v1/groups tells the two kinds of member apart.
    shown = {m["member_id"]: (m["protocol"], m["session_timeout_ms"]) for m in detail(ctx.shard, "g")["members"]}
    assert shown == {a: ("classic", SESSION_MS), b: ("classic", SESSION_MS), "c": ("consumer", None)}


def test_an_upgrade_answers_parked_classic_requests_rebalance_in_progress(ctx):
    a, b = classic_group(ctx)
    parked = ctx.join(member_id=a, protocols=PROTOCOLS)   # a rejoins: a new rebalance starts
    assert parked.response is None
    ctx.consumer_heartbeat(member_id="c")
    assert parked.error == E.REBALANCE_IN_PROGRESS


def test_classic_members_revoke_before_the_consumer_member_gets_their_partitions(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    # Classic members learn of the new epoch by REBALANCE_IN_PROGRESS on their heartbeat.
    assert ctx.heartbeat(member_id=a, generation_id=1).error == E.REBALANCE_IN_PROGRESS
    assert ctx.heartbeat(member_id=b, generation_id=1).error == E.REBALANCE_IN_PROGRESS
    # An eager member rejoins owning nothing (it revoked everything first).
    generation, sync = rejoin(ctx, a)
    assert generation == 2 and sync.error == 0
    owners_are_unique(ctx)
    # A cooperative member rejoins still owning its partitions: it must revoke first.
    generation, sync = rejoin(ctx, b, owned={"t": [1, 3]})
    kept = assigned(sync)
    assert generation == 1 and kept < {1, 3}
    assert ctx.heartbeat(member_id=b, generation_id=1).error == E.REBALANCE_IN_PROGRESS
    owners_are_unique(ctx)
    c = ctx.consumer_heartbeat(member_id="c", member_epoch=2, owned={})
    generation, sync = rejoin(ctx, b, owned={"t": sorted(kept)})
    assert generation == 2 and assigned(sync) == kept
    c = ctx.consumer_heartbeat(member_id="c", member_epoch=2, owned={})
    owners_are_unique(ctx)
    # Everyone holds a share and the group settles.
    group = ctx.consumer_group()
    held = [group.members[m].assigned.get(builders.topic_id("t"), frozenset()) for m in (a, b, "c")]
    assert sorted(len(h) for h in held) == [1, 1, 2] and frozenset().union(*held) == {0, 1, 2, 3}
    assert c.assignment is not None and group.state == "Stable"
    assert ctx.heartbeat(member_id=a, generation_id=2).error == 0


@pytest.mark.parametrize(("policy", "why"), [("disabled", "disabled"), ("downgrade", "disabled")])
def test_no_upgrade_when_the_policy_does_not_allow_it(policy, why):
    ctx = GroupTestContext(consumer_migration_policy=policy)
    ctx.set_topics(t=4)
    classic_group(ctx)
    written = len(ctx.written)
    call = ctx.consumer_heartbeat(member_id="c")
    assert call.error == E.GROUP_ID_NOT_FOUND and why in call.refused.message
    assert len(ctx.written) == written and ctx.state() == "Stable" and ctx.shard.consumer_groups == {}


def test_no_upgrade_of_a_group_bigger_than_the_consumer_group_limit():
    ctx = GroupTestContext(consumer_max_size=1)
    ctx.set_topics(t=4)
    classic_group(ctx)
    call = ctx.consumer_heartbeat(member_id="c")
    assert call.error == E.GROUP_ID_NOT_FOUND and "maximum size" in call.refused.message
    assert ctx.state() == "Stable"


def test_no_upgrade_of_a_group_that_does_not_use_the_consumer_protocol(ctx):
    classic_group(ctx, protocol_type="connect")
    call = ctx.consumer_heartbeat(member_id="c")
    assert call.error == E.GROUP_ID_NOT_FOUND and "embedded protocol" in call.refused.message
    assert ctx.state() == "Stable"


def test_no_upgrade_when_a_custom_assignor_put_user_data_in_the_assignment(ctx):
    classic_group(ctx, user_data=b"sticky-state")
    call = ctx.consumer_heartbeat(member_id="c")
    assert call.error == E.GROUP_ID_NOT_FOUND and "custom assignor" in call.refused.message
    assert ctx.state() == "Stable"


# ---------------------------------------------------------------- classic members inside a consumer group


def test_a_classic_member_joins_a_consumer_group_with_members(ctx):
    ctx.consumer_heartbeat(member_id="a")
    first = ctx.join(protocols=PROTOCOLS)
    assert first.error == E.MEMBER_ID_REQUIRED and ctx.written[-1].key != ConsumerGroupMemberMetadataKey("g", "")
    member_id = first.response.member_id
    join = ctx.join(member_id=member_id, protocols=PROTOCOLS)
    assert (join.error, join.response.generation_id, join.response.leader) == (0, 2, "")
    # Nothing yet: a still holds every partition.
    sync = ctx.sync(member_id=member_id, generation_id=2)
    assert sync.error == 0 and assigned(sync) == set()
    assert ctx.heartbeat(member_id=member_id, generation_id=2).error == 0
    kept = release_revoked(ctx, "a")
    # Its partitions are free now: the classic member is told to rejoin, and gets them.
    assert ctx.heartbeat(member_id=member_id, generation_id=2).error == E.REBALANCE_IN_PROGRESS
    generation, sync = rejoin(ctx, member_id)
    assert generation == 2 and assigned(sync) == {0, 1, 2, 3} - kept
    owners_are_unique(ctx)
    group = ctx.consumer_group()
    assert group.state == "Stable"
    described = ctx.shard.describe_consumer_group(ctx.rctx(1), "g")
    assert sorted(m.member_type for m in described.members) == [0, 1]


def test_a_static_classic_member_restarting_takes_over_its_partitions(ctx):
    ctx.consumer_heartbeat(member_id="a")
    first = ctx.join(version=5, group_instance_id="i1", protocols=PROTOCOLS)
    old_id = first.response.member_id
    ctx.sync(version=5, member_id=old_id, generation_id=2, group_instance_id="i1")
    kept = release_revoked(ctx, "a")
    join = ctx.join(version=5, member_id=old_id, group_instance_id="i1", protocols=PROTOCOLS)
    mine = assigned(ctx.sync(version=5, member_id=old_id, generation_id=join.response.generation_id,
                             group_instance_id="i1"))
    assert mine == {0, 1, 2, 3} - kept
    # The process restarts: a new member id under the same instance id takes the partitions over.
    again = ctx.join(version=5, group_instance_id="i1", protocols=PROTOCOLS)
    new_id = again.response.member_id
    assert again.error == 0 and new_id != old_id
    group = ctx.consumer_group()
    assert old_id not in group.members and group.static_members["i1"] == new_id
    assert assigned(ctx.sync(version=5, member_id=new_id, generation_id=again.response.generation_id,
                             group_instance_id="i1")) == mine
    # The old process is fenced.
    with pytest.raises(ApiError) as err:
        ctx.heartbeat(version=4, member_id=old_id, generation_id=again.response.generation_id, group_instance_id="i1")
    assert err.value.code == E.FENCED_INSTANCE_ID
    owners_are_unique(ctx)


def test_a_classic_member_commits_with_its_generation(ctx):
    ctx.consumer_heartbeat(member_id="a")
    member_id, _ = ctx.join_dynamic(protocols=PROTOCOLS)
    ok = ctx.commit(version=7, member_id=member_id, generation_id=2).response
    stale = ctx.commit(version=7, member_id=member_id, generation_id=1).response
    assert ok.topics[0].partitions[0].error_code == 0
    assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION


def test_a_classic_member_with_other_protocols_is_refused(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.join_dynamic(protocols=PROTOCOLS)
    with pytest.raises(ApiError) as err:
        ctx.join(member_id="x", protocols=(("roundrobin", builders.subscription("t")),))
    assert err.value.code == E.INCONSISTENT_GROUP_PROTOCOL


def test_no_classic_member_joins_a_consumer_group_when_migration_is_disabled():
    ctx = GroupTestContext(consumer_migration_policy="disabled")
    ctx.set_topics(t=4)
    ctx.consumer_heartbeat(member_id="a")
    with pytest.raises(ApiError) as err:
        ctx.join(protocols=PROTOCOLS)
    assert err.value.code == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_silent_classic_member_is_fenced_after_its_own_session_timeout(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    rejoin(ctx, b)
    for _ in range(4):
        ctx.sleep(SESSION_MS // 3)
        ctx.consumer_heartbeat(member_id="c", member_epoch=2)
        assert ctx.heartbeat(member_id=b, generation_id=2).error in (0, E.REBALANCE_IN_PROGRESS)
    # a sent nothing within its 10 s session (the group's consumer session is 45 s).
    group = ctx.consumer_group()
    assert a not in group.members and b in group.members and "c" in group.members
    owners_are_unique(ctx)


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    assert ctx.heartbeat(member_id=a, generation_id=1).error == E.REBALANCE_IN_PROGRESS
    assert ctx.deadline_in(classic_join_key("g", a)) == builders.REBALANCE_TIMEOUT_MS
    join = ctx.join(member_id=b, protocols=PROTOCOLS)
    assert ctx.deadline_in(classic_sync_key("g", b)) == builders.REBALANCE_TIMEOUT_MS
    assert join.error == 0
    ctx.sleep(builders.REBALANCE_TIMEOUT_MS)
    group = ctx.consumer_group()
    assert a not in group.members and b not in group.members and list(group.members) == ["c"]


def test_a_classic_member_leaving_keeps_the_consumer_group(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    left = ctx.leave(members=[(a, None)])
    assert [m.error_code for m in left.response.members] == [0]
    assert set(ctx.consumer_group().members) == {b, "c"}


# ---------------------------------------------------------------- downgrade


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    for m in (a, b):
        rejoin(ctx, m)
    ctx.consumer_heartbeat(member_id="c", member_epoch=2, owned={})
    group = ctx.consumer_group()
    epoch = group.group_epoch
    targets = {m: group.target[m] for m in (a, b)}
    written = len(ctx.written)
    ctx.consumer_heartbeat(member_id="c", member_epoch=-1)
    assert ctx.shard.consumer_groups == {}
    records = ctx.written[written:]
    # The consumer group's tombstones in its delete order, then the classic group.
    assert [type(r.key) for r in records][-2:] == [ConsumerGroupMetadataKey, GroupMetadataKey]
    assert all(r.value is None for r in records[:-1])
    assert records.index(next(r for r in records if isinstance(r.key, ConsumerGroupTargetAssignmentMetadataKey))) \
        > max(i for i, r in enumerate(records) if isinstance(r.key, ConsumerGroupTargetAssignmentMemberKey))
    assert isinstance(records[0].key, ConsumerGroupCurrentMemberAssignmentKey)
    value = records[-1].value
    assert (value.generation, value.protocol_type, value.protocol) == (epoch, "consumer", "range")
    assert {m.member_id: m.assignment for m in value.members} == {
        m: assignment_bytes(*sorted(targets[m][builders.topic_id("t")])) for m in (a, b)}
    # A classic rebalance follows: the members learn it on their next heartbeat.
    assert ctx.state() == "PreparingRebalance"
    assert ctx.heartbeat(member_id=a, generation_id=epoch).error == E.REBALANCE_IN_PROGRESS
    ctx.join(member_id=a, protocols=PROTOCOLS)
    ctx.join(member_id=b, protocols=PROTOCOLS)
    assert ctx.state() == "CompletingRebalance" and ctx.group().generation == epoch + 1
    fresh = ctx.reload()
    assert "g" in fresh.shard.groups and fresh.shard.consumer_groups == {}


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group(ctx):
    ctx.consumer_heartbeat(member_id="s", instance_id="i1")
    k, _ = ctx.join_dynamic(protocols=PROTOCOLS)
    kept = release_revoked(ctx, "s", "i1")
    rejoin(ctx, k)
    group = ctx.consumer_group()
    assert group.state == "Stable"
    epoch = group.group_epoch
    # The consumer-protocol static member goes away for a while; its process comes back
    # with the classic protocol under the same instance id.
    ctx.consumer_heartbeat(member_id="s", instance_id="i1", member_epoch=-2)
    join = ctx.join(version=5, group_instance_id="i1", protocols=PROTOCOLS)
    assert join.error == 0 and join.response.generation_id == epoch
    new_id = join.response.member_id
    assert ctx.shard.consumer_groups == {} and set(ctx.group().members) == {k, new_id}
    # Same subscription: no rebalance, the successor has its predecessor's partitions.
    assert ctx.state() == "Stable" and ctx.group().generation == epoch
    sync = ctx.sync(version=5, member_id=new_id, generation_id=epoch, group_instance_id="i1")
    assert assigned(sync) == kept
    assert ctx.heartbeat(member_id=k, generation_id=epoch).error == 0
    fresh = ctx.reload()
    assert fresh.shard.consumer_groups == {} and set(fresh.group().members) == {k, new_id}


def test_a_static_replacement_downgrade_rebalances_when_a_classic_member_was_not_given_its_share(ctx):
    ctx.consumer_heartbeat(member_id="s", instance_id="i1")
    k, first = ctx.join_dynamic(protocols=PROTOCOLS)
    assert assigned(ctx.sync(member_id=k, generation_id=first.response.generation_id)) == set()
    # s goes away for a while before it released k's share, and comes back classic.
    ctx.consumer_heartbeat(member_id="s", instance_id="i1", member_epoch=-2)
    join = ctx.join(version=5, group_instance_id="i1", protocols=PROTOCOLS)
    assert join.error == 0 and ctx.shard.consumer_groups == {}
    # k holds nothing, and in a Stable classic group its heartbeats would never say
    # otherwise: a classic rebalance hands its share out.
    assert ctx.state() == "PreparingRebalance"
    assert ctx.heartbeat(member_id=k, generation_id=join.response.generation_id).error == E.REBALANCE_IN_PROGRESS


def test_a_static_replacement_downgrade_rebalances_when_the_target_is_older_than_the_group_epoch(ctx):
    ctx.consumer_heartbeat(member_id="s", instance_id="i1")
    k, _ = ctx.join_dynamic(protocols=PROTOCOLS)
    release_revoked(ctx, "s", "i1")
    rejoin(ctx, k)
    # k leaves: a new group epoch, whose target nobody's request has computed yet.
    ctx.leave(members=[(k, None)])
    ctx.consumer_heartbeat(member_id="s", instance_id="i1", member_epoch=-2)
    group = ctx.consumer_group()
    assert group.assignment_epoch < group.group_epoch
    join = ctx.join(version=5, group_instance_id="i1", protocols=PROTOCOLS)
    assert join.error == 0 and ctx.shard.consumer_groups == {}
    # The classic group's assignment is that older target (s's share only): a classic
    # rebalance gives the successor every partition.
    assert ctx.state() == "PreparingRebalance"


def test_no_downgrade_when_the_policy_allows_only_upgrades():
    ctx = GroupTestContext(consumer_migration_policy="upgrade")
    ctx.set_topics(t=4)
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    for m in (a, b):
        rejoin(ctx, m)
    ctx.consumer_heartbeat(member_id="c", member_epoch=-1)
    group = ctx.consumer_group()
    assert set(group.members) == {a, b} and "g" not in ctx.shard.groups
    # Only classic members now: their heartbeats still lead them to the next assignment
    # (no member is left whose heartbeat would compute it).
    ctx.leave(members=[(b, None)])
    assert ctx.heartbeat(member_id=a, generation_id=2).error == E.REBALANCE_IN_PROGRESS
    generation, sync = rejoin(ctx, a)
    assert assigned(sync) == {0, 1, 2, 3} and ctx.consumer_group().state == "Stable"
    assert ctx.heartbeat(member_id=a, generation_id=generation).error == 0


def test_the_last_consumer_member_fenced_by_its_session_downgrades_the_group(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    for m in (a, b):
        rejoin(ctx, m)
    # c goes silent; the classic members keep their sessions alive until c's (45 s) ends.
    for _ in range(10):
        if "g" not in ctx.shard.consumer_groups:
            break
        ctx.sleep(SESSION_MS // 2)
        for m in (a, b):
            ctx.heartbeat(member_id=m, generation_id=2)
    assert ctx.shard.consumer_groups == {} and set(ctx.group().members) == {a, b}
    assert ctx.state() == "PreparingRebalance"


# ---------------------------------------------------------------- reload


def test_a_reload_continues_an_upgraded_group_with_its_classic_members(ctx):
    a, b = classic_group(ctx)
    ctx.consumer_heartbeat(member_id="c")
    rejoin(ctx, a)
    fresh = ctx.reload()
    before, after = ctx.consumer_group(), fresh.consumer_group()
    assert (after.group_epoch, after.assignment_epoch, after.members, after.target, after.owners) == \
        (before.group_epoch, before.assignment_epoch, before.members, before.target, before.owners)
    assert after.members[b].classic == ClassicMemberMetadata(SESSION_MS, PROTOCOLS)
    assert fresh.deadline_in(session_key("g", b)) == SESSION_MS
    assert fresh.heartbeat(member_id=b, generation_id=1).error == E.REBALANCE_IN_PROGRESS
    assert fresh.heartbeat(member_id=a, generation_id=2).error == 0
    owners_are_unique(fresh)
