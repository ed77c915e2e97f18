"""KIP-1263 (Kafka 4.3+): a consumer group's target assignment is computed at most once per
`consumer_assignment_interval_ms`, as Kafka's `canComputeNextTargetAssignment` allows.
Members that join within the interval are assigned together by the first heartbeat after
it, so a burst of joins moves the members already assigned once, not once per join, and
runs the assignor once. Where kgc goes further than Kafka: a member heartbeating while the
group waits is told to come back when the assignment is due, not a whole heartbeat
interval later.

Settling heartbeats: a member learns that partitions were freed for it, or taken from it,
only from a heartbeat's answer. At the regular interval (5 s) every step of a rebalance
waits for the next heartbeat: a first member gives partitions up at its next heartbeat, and
only the heartbeat after that hands them on. kgc tells a member to come back within
`SETTLING_HEARTBEAT_MS` while it waits for partitions that others hold, and while its
group's target assignment changed within the last regular interval. Kafka's coordinator
answers the regular interval throughout (a departure kgc takes on purpose)."""

from __future__ import annotations

import pytest

from coordinator.group.consumer.manager import SETTLING_HEARTBEAT_MS
from coordinator.records import (
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from tests.support.group_context import GroupTestContext
from tests.support.group_scenarios import owners_are_unique

START_MS = 1_000_000
REGULAR_MS = 5_000


@pytest.fixture
def ctx() -> GroupTestContext:
    context = GroupTestContext(start_ms=START_MS, consumer_assignment_interval_ms=1_000)
    context.set_topics(t=6)
    return context


def _stamps(ctx: GroupTestContext) -> list[tuple[int, int]]:
    return [(r.value.assignment_epoch, r.value.assignment_timestamp) for r in ctx.written
            if isinstance(r.key, ConsumerGroupTargetAssignmentMetadataKey) and r.value is not None]


def test_the_first_assignment_is_at_once_and_joins_within_the_interval_wait_for_it(ctx):
    a = ctx.consumer_heartbeat(member_id="a")
    assert (a.epoch, a.assignment) == (1, {"t": set(range(6))})
    ctx.sleep(100)
    b = ctx.consumer_heartbeat(member_id="b")
    c = ctx.consumer_heartbeat(member_id="c")
    # Joined, at the group's epoch, but the last assignment is 100 ms old: nothing yet.
    group = ctx.consumer_group()
    assert (group.group_epoch, group.assignment_epoch, group.state) == (3, 1, "Assigning")
    assert (b.assignment, c.assignment) == ({}, {})
    assert _stamps(ctx) == [(1, START_MS)]
    # a's heartbeat before the interval is up keeps everything.
    kept = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": set(range(6))})
    assert (kept.epoch, kept.assignment) == (1, None)


def test_a_member_of_a_waiting_group_is_told_to_come_back_when_the_assignment_is_due(ctx):
    first = ctx.consumer_heartbeat(member_id="a")
    assert first.response.heartbeat_interval_ms == 500            # nothing waits; settling
    ctx.sleep(100)
    assert ctx.consumer_heartbeat(member_id="b").response.heartbeat_interval_ms == 900
    ctx.sleep(850)
    # a, too, hears it early: the assignment due then will take partitions from it.
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": set(range(6))})
    assert a.response.heartbeat_interval_ms == 100                  # 50 ms left, at least 100
    ctx.sleep(50)
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": set(range(6))})
    assert (a.epoch, len(a.assignment["t"]), a.response.heartbeat_interval_ms) == (1, 3, 500)


def test_a_burst_of_joins_runs_the_assignor_once_per_interval():
    ctx = GroupTestContext(consumer_assignment_interval_ms=1_000)
    ctx.set_topics(t=300)
    ctx.shard.consumer.stopwatch = iter(range(10**6)).__next__
    for i in range(100):
        ctx.consumer_heartbeat(member_id=f"m{i:03d}")
        ctx.sleep(20)                                               # 100 joins over 2 s
    assert len(ctx.shard.consumer.assignor_runs) == 2
    ctx.consumer_heartbeat(member_id="m000", member_epoch=1, owned={"t": set(range(300))})
    assert len(ctx.shard.consumer.assignor_runs) == 3
    assert ctx.consumer_group().assignment_epoch == 100


def test_the_first_heartbeat_after_the_interval_assigns_every_member_that_joined(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.sleep(100)
    ctx.consumer_heartbeat(member_id="b")
    ctx.consumer_heartbeat(member_id="c")
    ctx.sleep(900)
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": set(range(6))})
    # One computation for both joins: a keeps a third and revokes the rest at once.
    assert len(a.assignment["t"]) == 2
    group = ctx.consumer_group()
    assert group.assignment_epoch == 3
    assert {m: len(p["t"]) for m, p in ((m, _named(ctx, t)) for m, t in group.target.items())} == \
        {"a": 2, "b": 2, "c": 2}
    assert _stamps(ctx) == [(1, START_MS), (3, START_MS + 1_000)]
    ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned=a.assignment)
    b = ctx.consumer_heartbeat(member_id="b", member_epoch=1, owned={})
    c = ctx.consumer_heartbeat(member_id="c", member_epoch=1, owned={})
    assert (b.epoch, len(b.assignment["t"]), c.epoch, len(c.assignment["t"])) == (3, 2, 3, 2)
    assert group.state == "Stable"
    owners_are_unique(ctx)


def test_a_join_after_a_quiet_interval_is_assigned_at_once(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.sleep(1_000)
    b = ctx.consumer_heartbeat(member_id="b")
    assert ctx.consumer_group().assignment_epoch == 2 and b.epoch == 2


def test_an_interval_of_zero_assigns_at_every_change():
    ctx = GroupTestContext(consumer_assignment_interval_ms=0)
    ctx.set_topics(t=2)
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="b")
    assert ctx.consumer_group().assignment_epoch == 2


def test_a_group_emptied_by_its_members_leaving_assigns_its_next_member_at_once(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.consumer_heartbeat(member_id="a", member_epoch=-1)       # leaves
    assert _stamps(ctx)[-1] == (2, 0)                           # as Kafka: "a new group"
    ctx.sleep(10)
    b = ctx.consumer_heartbeat(member_id="b")
    assert (b.epoch, b.assignment) == (3, {"t": set(range(6))})


def test_a_stamp_later_than_the_clock_does_not_hold_the_group(ctx):
    # The wall clock went back (or the log came from an instance whose clock ran ahead):
    # waiting until the stamp plus the interval could hold every join for that long.
    ctx.consumer_heartbeat(member_id="a")
    later = ctx.reload(start_ms=START_MS - 3_600_000)
    b = later.consumer_heartbeat(member_id="b")
    assert later.consumer_group().assignment_epoch == 2 and b.epoch == 2


def test_the_stamp_is_written_as_kafka_writes_it_and_survives_a_reload(ctx):
    ctx.consumer_heartbeat(member_id="a")
    [record] = [r for r in ctx.written if isinstance(r.key, ConsumerGroupTargetAssignmentMetadataKey)]
    assert record.value == ConsumerGroupTargetAssignmentMetadataValue(1, START_MS)
    fresh = ctx.reload()
    assert fresh.consumer_group().assignment_timestamp_ms == START_MS
    fresh.sleep(100)
    fresh.consumer_heartbeat(member_id="b")
    assert fresh.consumer_group().assignment_epoch == 1      # still within the reloaded interval


def _named(ctx: GroupTestContext, assignment) -> dict[str, set[int]]:
    names = {t.topic_id: t.name for t in ctx.topics.by_name.values()}
    return {names[topic_id]: set(partitions) for topic_id, partitions in assignment.items()}


# ---------------------------------------------------------------- settling heartbeats


def test_a_member_waiting_for_partitions_heartbeats_sooner_however_old_the_assignment(ctx):
    ctx.consumer_heartbeat(member_id="a")
    ctx.sleep(REGULAR_MS)
    quiet = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": set(range(6))})
    assert quiet.response.heartbeat_interval_ms == REGULAR_MS
    b = ctx.consumer_heartbeat(member_id="b")          # assigned at once: a still holds b's share
    assert (b.epoch, b.assignment, b.response.heartbeat_interval_ms) == (2, {}, SETTLING_HEARTBEAT_MS)
    ctx.sleep(REGULAR_MS + 1_000)                        # a has not heartbeat since
    waiting = ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={})
    assert (waiting.assignment, waiting.response.heartbeat_interval_ms) == (None, SETTLING_HEARTBEAT_MS)
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned={"t": set(range(6))})
    assert len(a.assignment["t"]) == 3                  # told to revoke three
    a = ctx.consumer_heartbeat(member_id="a", member_epoch=1, owned=a.assignment)
    b = ctx.consumer_heartbeat(member_id="b", member_epoch=2, owned={})
    assert len(b.assignment["t"]) == 3 and ctx.consumer_group().state == "Stable"
    # Settled, and the assignment older than the regular interval: back to it.
    assert b.response.heartbeat_interval_ms == REGULAR_MS
    owners_are_unique(ctx)


def test_members_heartbeat_sooner_for_one_regular_interval_after_an_assignment(ctx):
    first = ctx.consumer_heartbeat(member_id="a")        # the group's first assignment
    assert first.response.heartbeat_interval_ms == SETTLING_HEARTBEAT_MS
    ctx.sleep(REGULAR_MS - 1)
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1,
                                  owned={"t": set(range(6))}).response.heartbeat_interval_ms == SETTLING_HEARTBEAT_MS
    ctx.sleep(1)
    assert ctx.consumer_heartbeat(member_id="a", member_epoch=1,
                                  owned={"t": set(range(6))}).response.heartbeat_interval_ms == REGULAR_MS


def test_a_regular_interval_below_the_settling_one_is_kept():
    ctx = GroupTestContext(start_ms=START_MS, consumer_heartbeat_interval_ms=200)
    ctx.set_topics(t=2)
    assert ctx.consumer_heartbeat(member_id="a").response.heartbeat_interval_ms == 200


def _form(members: int, join_spacing_ms: int, partitions: int) -> int:
    """Milliseconds from the first member's join until the group is Stable and balanced,
    with members that heartbeat when told to, acknowledge a changed assignment at once (as
    the Java client and librdkafka do) and let go of revoked partitions at once."""
    ctx = GroupTestContext(start_ms=START_MS, consumer_assignment_interval_ms=1_000,
                           consumer_session_timeout_ms=600_000)
    ctx.set_topics(t=partitions)
    due = {f"m{i:03d}": START_MS + i * join_spacing_ms for i in range(members)}
    epoch = dict.fromkeys(due, 0)
    held: dict[str, set[int]] = {m: set() for m in due}
    for _ in range(members * 200):
        member = min(due, key=due.__getitem__)
        ctx.sleep(max(0, due[member] - ctx.clock.now_ms()))
        if epoch[member] == 0:
            call = ctx.consumer_heartbeat(member_id=member)
        else:
            call = ctx.consumer_heartbeat(member_id=member, member_epoch=epoch[member], owned={"t": held[member]})
        assert call.refused is None, call.refused
        epoch[member] = call.epoch
        changed = call.assignment is not None and call.assignment.get("t", set()) != held[member]
        if call.assignment is not None:
            held[member] = call.assignment.get("t", set())
        due[member] = ctx.clock.now_ms() + (1 if changed else call.response.heartbeat_interval_ms)
        sizes = {len(p) for p in held.values()}
        if ctx.consumer_group().state == "Stable" and len(ctx.consumer_group().members) == members \
                and min(sizes) > 0 and max(sizes) - min(sizes) <= 1:
            owners_are_unique(ctx)
            return ctx.clock.now_ms() - START_MS
    raise AssertionError("the group did not settle")


@pytest.mark.parametrize("members", [2, 50, 200])
def test_a_group_joining_at_once_settles_within_a_few_settling_intervals(members):
    # Members' first heartbeats spread over a second, as a JVM starting many consumers sends
    # them. At the regular interval alone the first member gives up its partitions at its
    # second heartbeat: more than one regular interval (6 s in this model).
    took_ms = _form(members, join_spacing_ms=1_000 // members, partitions=3 * members)
    assert took_ms < 1_000 + 4 * SETTLING_HEARTBEAT_MS + 1_000, took_ms
