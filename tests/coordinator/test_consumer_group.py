"""The KIP-848 consumer group state machine, driven as the runtime drives it, on a manual clock.

Cases follow the edge cases Kafka's own coordinator tests cover: joins and their request
rules, revocation before reassignment, lost answers, timers, static members, regex and
metadata changes, assignors, the group size limit, offsets, listing, and reload.
"""

from __future__ import annotations

import pytest

from coordinator.group.consumer.group import MemberState
from coordinator.records import ConsumerGroupMetadataKey, ConsumerGroupRegularExpressionKey
from protocol.errors import ErrorCode
from tests.support.group_context import GroupTestContext
from tests.support.group_scenarios import owners_are_unique

E = ErrorCode


@pytest.fixture
def ctx() -> GroupTestContext:
    context = GroupTestContext(consumer_session_timeout_ms=45_000)
    context.set_topics(t=4)
    return context


# ---------------------------------------------------------------- joining


def test_a_single_member_gets_every_partition_at_epoch_one(ctx):
    call = ctx.consumer_heartbeat(member_id="a")
    assert (call.error, call.epoch, call.assignment) == (0, 1, {"t": {0, 1, 2, 3}})
    # Settling: a group just assigned may be joined by more (test_consumer_assignment_interval.py).
    assert call.response.heartbeat_interval_ms == 500
    group = ctx.consumer_group()
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, "Stable")


def test_v1_needs_a_member_id_but_v0_gets_one_from_the_coordinator(ctx):
    assert ctx.consumer_heartbeat(version=1, member_id="").error == E.INVALID_REQUEST
    call = ctx.consumer_heartbeat(version=0, member_id="")
    assert call.error == 0 and call.response.member_id
    assert call.response.member_id in ctx.consumer_group().members


@pytest.mark.parametrize(("fields", "code"), [
    ({"owned": None}, E.INVALID_REQUEST),                       # TopicPartitions must be present on join
    ({"owned": {"t": [0]}}, E.INVALID_REQUEST),                  # ... and empty
    ({"rebalance_timeout_ms": -1}, E.INVALID_REQUEST),
    ({"subscribe": None}, E.INVALID_REQUEST),
    ({"group_id": " "}, E.INVALID_REQUEST),
    ({"instance_id": ""}, E.INVALID_REQUEST),
    ({"member_epoch": -3}, E.INVALID_REQUEST),
    ({"assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR),
])
def test_bad_joins_are_refused_and_change_nothing(ctx, fields, code):
    call = ctx.consumer_heartbeat(**fields)
    assert call.error == code and call.refused.message
    assert ctx.written == [] and ctx.shard.consumer_groups == {}


def test_joining_with_no_topics_is_valid(ctx):
    call = ctx.consumer_heartbeat(subscribe=[])
    assert (call.error, call.assignment) == (0, {})


def test_members_wait_until_the_upstreams_topics_are_known():
    # Just started: "no topics yet" must not read as "no topics", which would revoke everything.
    fresh = GroupTestContext()
    assert fresh.consumer_heartbeat(member_id="a").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.written == []
    fresh.set_topics(t=1)
    assert fresh.consumer_heartbeat(member_id="a").assignment == {"t": {0}}


def test_heartbeats_to_an_absent_group_are_group_id_not_found(ctx):
    assert ctx.consumer_heartbeat(member_epoch=1).error == E.GROUP_ID_NOT_FOUND
    assert ctx.consumer_heartbeat(member_epoch=-1).error == E.GROUP_ID_NOT_FOUND


def test_an_identical_heartbeat_writes_nothing(ctx):
    ctx.consumer_heartbeat(member_id="a")
    written = len(ctx.written)
    call = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    assert (call.error, call.epoch) == (0, 1)
    assert len(ctx.written) == written


# ---------------------------------------------------------------- revocation before reassignment


def test_each_epoch_is_stamped_from_its_start_to_its_first_stable(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.sleep(1_000)
    started = ctx.clock.now_ms()
    ctx.consumer_heartbeat(member_id="b")
    ctx.sleep(100)
    kept = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}}).assignment["t"]
    ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": kept})
    group = ctx.consumer_group()
    assert (group.epoch_since_ms, group.stable_since_ms) == (started, None)
    ctx.sleep(50)
    ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={})
    assert group.state == "Stable" and group.stable_since_ms - group.epoch_since_ms == 150


def test_assignor_runs_are_timed_by_the_injected_stopwatch(ctx):
    ctx.shard.consumer.stopwatch = iter([10.0, 10.25, 20.0, 20.5]).__next__
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b", assignor="range")
    ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})   # no new target: not run
    assert list(ctx.shard.consumer.assignor_runs) == [("uniform", 0.25), ("range", 0.5)]


def test_a_partition_moves_only_after_its_owner_revoked_it(ctx):
    ctx.consumer_heartbeat(member_id="a")
    b = ctx.consumer_heartbeat(member_id="b")
    # b is at the new epoch but gets nothing yet: a still holds every partition.
    assert (b.epoch, b.assignment) == (2, {})
    assert ctx.consumer_group().members["b"].state == MemberState.UNRELEASED_PARTITIONS
    owners_are_unique(ctx)

    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    # a revokes two partitions at its own epoch (no epoch bump while revoking).
    assert a.epoch == 1 and len(a.assignment["t"]) == 2
    assert ctx.consumer_group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={}).assignment is None
    owners_are_unique(ctx)

    kept = a.assignment["t"]
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": kept})
    assert (a.epoch, ctx.consumer_group().members["a"].state) == (2, MemberState.STABLE)
    b = ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={})
    assert b.assignment == {"t": {0, 1, 2, 3} - kept}
    assert ctx.consumer_group().state == "Stable"
    owners_are_unique(ctx)


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout(ctx):
    ctx.consumer_heartbeat(member_id="a", rebalance_timeout_ms=10_000)
    ctx.consumer_heartbeat(member_id="b")
    ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    ctx.sleep(9_999)
    assert "a" in ctx.consumer_group().members
    ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={})   # keeps b's session alive
    ctx.sleep(1)
    assert set(ctx.consumer_group().members) == {"b"}
    b = ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={})
    assert b.assignment == {"t": {0, 1, 2, 3}} and b.epoch == 3


def test_a_stale_rebalance_timer_does_not_fence_a_member_that_revoked(ctx):
    ctx.consumer_heartbeat(member_id="a", rebalance_timeout_ms=10_000)
    ctx.consumer_heartbeat(member_id="b")
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": a.assignment["t"]})
    ctx.sleep(20_000)
    assert set(ctx.consumer_group().members) == {"a", "b"}


def test_a_silent_member_is_fenced_after_its_session_timeout(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.sleep(44_999)
    assert "a" in ctx.consumer_group().members
    ctx.sleep(1)
    group = ctx.consumer_group()
    assert group.members == {} and group.state == "Empty" and group.group_epoch == 2
    assert group.owners == {}


def test_dropping_a_topic_revokes_its_partitions_at_once(ctx):
    ctx.set_topics(t=2, u=2)
    ctx.consumer_heartbeat(member_id="a", subscribe=["t", "u"])
    call = ctx.consumer_heartbeat(member_id="a", member_epoch=1, subscribe=["t"], owned={"t": {0, 1}, "u": {0, 1}})
    assert call.assignment == {"t": {0, 1}}
    call = ctx.consumer_heartbeat(member_id="a", member_epoch=call.epoch, owned={"t": {0, 1}})
    assert ctx.consumer_group().members["a"].pending_revocation == {}
    owners_are_unique(ctx)


# ---------------------------------------------------------------- epochs


def test_a_retry_of_a_lost_answer_with_the_previous_epoch_is_accepted(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    kept = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}}).assignment["t"]
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": kept}).epoch == 2
    # The answer at epoch 2 was lost: a retries at epoch 1 owning a subset of its partitions.
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": kept}).error == 0
    # With a partition it does not hold, or an epoch ahead, it is fenced.
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1,
                                  owned={"t": {0, 1, 2, 3}}).error == E.FENCED_MEMBER_EPOCH
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=3, owned={"t": kept}).error == E.FENCED_MEMBER_EPOCH
    assert ctx.consumer_heartbeat(member_id="zz", member_epoch=2).error == E.UNKNOWN_MEMBER_ID


def test_a_fenced_member_rejoining_with_epoch_zero_gets_its_partitions_back(ctx):
    ctx.consumer_heartbeat(member_id="a")
    call = ctx.consumer_heartbeat(member_id="a")   # same id, epoch 0: it dropped everything
    assert call.error == 0 and call.assignment == {"t": {0, 1, 2, 3}}
    owners_are_unique(ctx)


def test_leaving_fences_the_member_and_bumps_the_epoch(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    call = ctx.consumer_heartbeat(member_id="b", member_epoch=-1)
    assert (call.error, call.epoch) == (0, -1)
    group = ctx.consumer_group()
    assert set(group.members) == {"a"} and group.group_epoch == 3
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    assert (a.epoch, a.assignment) == (3, None)   # unchanged partitions: no assignment sent


# ---------------------------------------------------------------- static members


def test_a_static_member_returning_under_a_new_id_inherits_its_partitions(ctx):
    ctx.consumer_heartbeat(member_id="a", instance_id="i-a")
    ctx.consumer_heartbeat(member_id="b", instance_id="i-b")
    for _ in range(3):
        for mid in ("a", "b"):
            member = ctx.consumer_group().members[mid]
            owned = {"t": member.assigned.get(ctx.topics.by_name["t"].topic_id, set())}
            ctx.consumer_heartbeat(member_id=mid, instance_id=f"i-{mid}", member_epoch=member.member_epoch, owned=owned)
    held = ctx.consumer_group().members["a"].assigned
    epoch = ctx.consumer_group().group_epoch
    assert ctx.consumer_heartbeat(member_id="a", instance_id="i-a", member_epoch=-2).epoch == -2
    assert ctx.consumer_group().members["a"].assigned == held     # kept while away
    # A second process with the same instance id while b is alive is refused.
    assert ctx.consumer_heartbeat(member_id="b2", instance_id="i-b").error == E.UNRELEASED_INSTANCE_ID
    back = ctx.consumer_heartbeat(member_id="a2", instance_id="i-a")
    assert back.error == 0 and ctx.consumer_group().group_epoch == epoch   # no rebalance
    assert ctx.consumer_group().members["a2"].assigned == held
    assert "a" not in ctx.consumer_group().members
    # The old id is fenced by its replacement.
    assert ctx.consumer_heartbeat(member_id="a", instance_id="i-a", member_epoch=back.epoch).error \
        == E.FENCED_INSTANCE_ID
    owners_are_unique(ctx)


def test_a_static_member_away_too_long_is_fenced(ctx):
    ctx.consumer_heartbeat(member_id="a", instance_id="i-a")
    ctx.consumer_heartbeat(member_id="a", instance_id="i-a", member_epoch=-2)
    ctx.sleep(45_000)
    assert ctx.consumer_group().members == {}


# ---------------------------------------------------------------- metadata and regexes


def test_new_partitions_and_new_topics_start_a_new_epoch(ctx):
    ctx.consumer_heartbeat(member_id="a", subscribe=["t", "later"])
    ctx.set_topics(t=6)
    call = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    assert (call.epoch, call.assignment) == (2, {"t": set(range(6))})
    ctx.set_topics(t=6, later=2)
    call = ctx.consumer_heartbeat(member_id="a", member_epoch=2, owned={"t": set(range(6))})
    assert (call.epoch, call.assignment) == (3, {"t": set(range(6)), "later": {0, 1}})


def test_a_regex_subscribes_to_the_topics_it_fully_matches(ctx):
    ctx.set_topics(orders=1, **{"orders-eu": 2, "x-orders": 1})
    call = ctx.consumer_heartbeat(member_id="a", subscribe=[], regex="orders.*")
    assert call.assignment == {"orders": {0}, "orders-eu": {0, 1}}
    regexes = [r for r in ctx.written if isinstance(r.key, ConsumerGroupRegularExpressionKey)]
    assert regexes[-1].value.topics == ("orders", "orders-eu")
    # A topic created later that matches is picked up with a new epoch.
    ctx.set_topics(orders=1, **{"orders-eu": 2, "x-orders": 1, "orders-us": 1})
    call = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"orders": {0}, "orders-eu": {0, 1}})
    assert call.epoch == 2 and call.assignment["orders-us"] == {0}
    # Leaving the regex behind tombstones it.
    ctx.consumer_heartbeat(member_id="a", member_epoch=-1)
    assert ctx.written[-3] == (ConsumerGroupRegularExpressionKey("g", "orders.*"), None, ())
    assert ctx.consumer_group().regexes == {}


def test_an_invalid_regex_is_refused(ctx):
    call = ctx.consumer_heartbeat(member_id="a", subscribe=[], regex="orders(")
    assert call.error == E.INVALID_REGULAR_EXPRESSION and ctx.written == []


# ---------------------------------------------------------------- assignors and limits


def test_uniform_balances_and_range_gives_contiguous_ranges(ctx):
    ctx.set_topics(t=7)
    for mid in ("a", "b", "c"):
        ctx.consumer_heartbeat(member_id=mid)
    sizes = sorted(sum(len(p) for p in a.values()) for a in ctx.consumer_group().target.values())
    assert sizes == [2, 2, 3]
    other = GroupTestContext()
    other.set_topics(t=7)
    for mid in ("a", "b", "c"):
        other.consumer_heartbeat(member_id=mid, assignor="range")
    tid = other.topics.by_name["t"].topic_id
    assert {m: set(a[tid]) for m, a in other.consumer_group().target.items()} == {
        "a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}


def test_uniform_is_sticky_when_a_member_joins(ctx):
    ctx.set_topics(t=6)
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    before = dict(ctx.consumer_group().target)
    ctx.consumer_heartbeat(member_id="c")
    after = ctx.consumer_group().target
    for mid in ("a", "b"):
        tid = ctx.topics.by_name["t"].topic_id
        assert after[mid][tid] <= before[mid][tid] and len(after[mid][tid]) == 2


def test_the_group_size_limit(ctx):
    small = GroupTestContext(consumer_max_size=1)
    small.set_topics(t=1)
    small.consumer_heartbeat(member_id="a")
    assert small.consumer_heartbeat(member_id="b").error == E.GROUP_MAX_SIZE_REACHED
    assert small.consumer_heartbeat(member_id="a").error == 0   # a known member may rejoin


# ---------------------------------------------------------------- offsets, listing, reload


def test_commits_check_member_epochs(ctx):
    ctx.consumer_heartbeat(member_id="a")
    assert ctx.commit(version=9, member_id="a", generation_id=1).response.topics[0].partitions[0].error_code == 0
    stale = ctx.commit(version=9, member_id="a", generation_id=0).response.topics[0].partitions[0].error_code
    assert stale == E.STALE_MEMBER_EPOCH
    old = ctx.commit(version=8, member_id="a", generation_id=1).response.topics[0].partitions[0].error_code
    assert old == E.UNSUPPORTED_VERSION
    unknown = ctx.commit(version=9, member_id="x", generation_id=1).response.topics[0].partitions[0].error_code
    assert unknown == E.UNKNOWN_MEMBER_ID
    assert ctx.fetch("g", None, version=9).topics[0].partitions[0].offset == 10
    assert ctx.shard.fetch_offsets(ctx.rctx(9), "g", None, False, ("a", 0)).error == E.STALE_MEMBER_EPOCH
    assert ctx.shard.fetch_offsets(ctx.rctx(9), "g", None, False, ("a", 1)).error == E.NONE


def test_a_commit_at_the_previous_epoch_is_accepted_for_partitions_still_held(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    kept = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}}).assignment["t"]
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": kept}).epoch == 2
    given_up = ({0, 1, 2, 3} - kept).pop()

    def commit(epoch: int, partition: int) -> int:
        response = ctx.commit(version=9, member_id="a", generation_id=epoch, offsets=(("t", partition, 10, None),))
        return response.response.topics[0].partitions[0].error_code

    # Sent at epoch 1 before a heard of epoch 2: a still holds the partition, nobody else had it.
    assert commit(1, min(kept)) == E.NONE
    # A partition a gave up, or an epoch older than the previous one, stays refused.
    assert commit(1, given_up) == E.STALE_MEMBER_EPOCH
    assert commit(0, min(kept)) == E.STALE_MEMBER_EPOCH


def _given_partitions_at_two_epochs(ctx) -> tuple[set[int], set[int]]:
    """a holds every partition from epoch 1; b takes two at epoch 2 and leaves, and a gets
    them back at epoch 3: (the partitions a has held since epoch 1, those given at 3)."""
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    kept = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}}).assignment["t"]
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": kept}).epoch == 2
    assert ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={}).assignment == {"t": {0, 1, 2, 3} - kept}
    ctx.consumer_heartbeat(member_id="b", member_epoch=-1)
    back = ctx.consumer_heartbeat(member_id="a", member_epoch=2, owned={"t": kept})
    assert (back.epoch, back.assignment) == (3, {"t": {0, 1, 2, 3}})
    return kept, {0, 1, 2, 3} - kept


def _commit_error(ctx, epoch: int, partition: int, member_id: str = "a", version: int = 9) -> int:
    response = ctx.commit(version=version, member_id=member_id, generation_id=epoch,
                          offsets=(("t", partition, 10, None),))
    return response.response.topics[0].partitions[0].error_code


def test_a_commit_at_an_older_epoch_is_accepted_for_partitions_held_since_then(ctx):
    # KIP-1251 (Kafka 4.3+): each partition is fenced by the epoch it was given at, not
    # by the member's epoch. A commit a sent at epoch 1, answered after a moved on twice.
    kept, given_at_3 = _given_partitions_at_two_epochs(ctx)
    assert _commit_error(ctx, 1, min(kept)) == E.NONE
    assert ctx.consumer_group().members["a"].assignment_epoch(ctx.topics.by_name["t"].topic_id, min(kept)) == 1
    assert _commit_error(ctx, 2, min(kept)) == E.NONE
    # A partition a was given at epoch 3 was b's before: older commits of it are refused.
    assert _commit_error(ctx, 2, min(given_at_3)) == E.STALE_MEMBER_EPOCH
    assert _commit_error(ctx, 3, min(given_at_3)) == E.NONE
    # An epoch a never had, or older than every partition's, stays refused.
    assert _commit_error(ctx, 4, min(kept)) == E.STALE_MEMBER_EPOCH
    assert _commit_error(ctx, 0, min(kept)) == E.STALE_MEMBER_EPOCH
    # One refused partition refuses the whole commit, as Kafka's validator does.
    both = ctx.commit(version=9, member_id="a", generation_id=2,
                      offsets=(("t", min(kept), 11, None), ("t", min(given_at_3), 11, None)))
    assert {p.error_code for p in both.response.topics[0].partitions} == {E.STALE_MEMBER_EPOCH}


def test_a_record_whose_epochs_do_not_match_its_partitions_reads_them_as_the_members_epoch(ctx):
    # Kafka's `Utils.assignmentFromTopicPartitions` logs it and uses the member epoch.
    from coordinator.records import ConsumerGroupCurrentMemberAssignmentValue

    ctx.consumer_heartbeat(member_id="a")
    topic_id = ctx.topics.by_name["t"].topic_id
    group = ctx.consumer_group()
    group.replay_current_assignment("a", ConsumerGroupCurrentMemberAssignmentValue(
        6, 5, 0, ((topic_id, (0, 1, 2, 3), (1, 2)),), ()))
    assert {group.members["a"].assignment_epoch(topic_id, p) for p in range(4)} == {6}


def test_assignment_epochs_are_written_as_kafka_writes_them_and_survive_a_reload(ctx):
    kept, given_at_3 = _given_partitions_at_two_epochs(ctx)
    value = ctx.consumer_group().members["a"].assignment_value()
    (topic_id, partitions, epochs), = value.assigned_partitions
    assert dict(zip(partitions, epochs, strict=True)) == {**dict.fromkeys(kept, 1), **dict.fromkeys(given_at_3, 3)}
    reloaded = ctx.reload()
    assert reloaded.consumer_group().members["a"] == ctx.consumer_group().members["a"]
    assert _commit_error(reloaded, 1, min(kept)) == E.NONE
    assert _commit_error(reloaded, 2, min(given_at_3)) == E.STALE_MEMBER_EPOCH


def test_a_transactional_commit_at_an_older_epoch_is_checked_per_partition_too(ctx):
    from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest

    kept, given_at_3 = _given_partitions_at_two_epochs(ctx)

    def txn_error(epoch: int, partition: int) -> int:
        cls = TxnOffsetCommitRequest[3]
        topic = cls.TxnOffsetCommitRequestTopic
        request = cls(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0, generation_id=epoch,
                      member_id="a", group_instance_id=None, topics=[topic(name="t", partitions=[
                          topic.TxnOffsetCommitRequestPartition(partition_index=partition, committed_offset=5,
                                                                committed_leader_epoch=-1, committed_metadata="")])])
        return ctx.shard.txn_commit_offsets(ctx.rctx(3), request, 0).response.topics[0].partitions[0].error_code

    assert txn_error(1, min(kept)) == E.NONE
    # Before TxnOffsetCommit v6, a stale member epoch is answered ILLEGAL_GENERATION.
    assert txn_error(2, min(given_at_3)) == E.ILLEGAL_GENERATION


def test_a_static_members_successor_inherits_its_partitions_as_given_at_epoch_zero(ctx):
    # Kafka resets a leaving static member's assignment epochs to 0: its successor, a new
    # member id, may commit them at any epoch it has had.
    assert ctx.consumer_heartbeat(member_id="s", instance_id="i").assignment == {"t": {0, 1, 2, 3}}
    ctx.consumer_heartbeat(member_id="s", instance_id="i", member_epoch=-2)
    successor = ctx.consumer_heartbeat(member_id="s2", instance_id="i")
    assert (successor.error, successor.epoch, successor.assignment) == (0, 1, {"t": {0, 1, 2, 3}})
    assert _commit_error(ctx, 0, 2, member_id="s2") == E.NONE
    held = ctx.consumer_group().members["s2"]
    assert {held.assignment_epoch(t, p) for t, ps in held.assigned.items() for p in ps} == {0}
    assert _commit_error(ctx, 0, 2, member_id="s") == E.UNKNOWN_MEMBER_ID


def test_consumer_groups_are_listed_by_type_and_unknown_to_describe_groups(ctx):
    ctx.consumer_heartbeat(member_id="a")
    listed = ctx.shard.list_groups(set(), {"consumer"})
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("g", "consumer", "consumer", "Stable")]
    assert ctx.shard.list_groups(set(), {"classic"}) == []
    assert ctx.shard.list_groups({"empty"}, set()) == []
    assert ctx.describe("g", version=6).error == E.GROUP_ID_NOT_FOUND
    assert ctx.shard.describe_consumer_group(ctx.rctx(1), "g").members[0].member_type == 1


def test_empty_groups_convert_both_ways_and_keep_their_offsets(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.commit(version=9, member_id="a", generation_id=1)
    ctx.consumer_heartbeat(member_id="a", member_epoch=-1)
    # A classic JoinGroup turns the empty consumer group into a classic one.
    member_id, _ = ctx.join_dynamic(group_id="g")
    assert "g" not in ctx.shard.consumer_groups and ctx.state("g") == "PreparingRebalance"
    ctx.finish_join_phase()
    assert ctx.fetch("g").topics[0].partitions[0].offset == 10
    ctx.leave(members=[(member_id, None)])
    assert ctx.state("g") == "Empty"
    # And a ConsumerGroupHeartbeat turns the empty classic group back.
    assert ctx.consumer_heartbeat(member_id="b").error == 0
    assert "g" not in ctx.shard.groups and ctx.fetch("g").topics[0].partitions[0].offset == 10
    fresh = ctx.reload()
    assert set(fresh.shard.consumer_groups) == {"g"} and "g" not in fresh.shard.groups


def test_deleting_an_empty_consumer_group(ctx):
    ctx.consumer_heartbeat(member_id="a")
    assert ctx.delete_groups("g") == [("g", E.NON_EMPTY_GROUP)]
    ctx.consumer_heartbeat(member_id="a", member_epoch=-1)
    assert ctx.delete_groups("g") == [("g", E.NONE)]
    assert ctx.shard.consumer_groups == {}
    assert ctx.reload().shard.consumer_groups == {}


def test_an_empty_consumer_group_is_deleted_once_its_offsets_expire():
    ctx = GroupTestContext(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000,
                           consumer_session_timeout_ms=120_000)
    ctx.set_topics(t=1)
    ctx.consumer_heartbeat(member_id="a")
    ctx.commit(version=9, member_id="a", generation_id=1, offsets=(("t", 0, 5, None), ("gone", 0, 7, None)))
    ctx.sleep(60_000)
    # A member subscribes to t: only the offset of the topic nobody reads expires.
    assert [t.name for t in ctx.fetch("g").topics] == ["t"]
    ctx.consumer_heartbeat(member_id="a", member_epoch=-1)
    ctx.sleep(10_000)
    assert ctx.shard.consumer_groups == {} and ctx.fetch("g").topics == ()
    assert ctx.reload().shard.consumer_groups == {}


def test_a_reload_from_the_log_continues_mid_reconciliation(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": {0, 1, 2, 3}})
    fresh = ctx.reload()
    before, after = ctx.consumer_group(), fresh.consumer_group()
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash, after.members, after.target, after.owners) \
        == (before.group_epoch, before.assignment_epoch, before.metadata_hash, before.members, before.target,
            before.owners)
    assert [r.key for r in ctx.written if isinstance(r.key, ConsumerGroupMetadataKey)]
    call = fresh.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": a.assignment["t"]})
    assert call.epoch == 2
    b = fresh.consumer_heartbeat(member_id="b", member_epoch=2, owned={})
    assert b.assignment == {"t": {0, 1, 2, 3} - a.assignment["t"]}
    owners_are_unique(fresh)
