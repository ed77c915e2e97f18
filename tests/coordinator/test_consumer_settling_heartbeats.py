"""A member of a settling consumer group heartbeats sooner than the regular interval.

A member learns that partitions were freed for it, or taken from it, only from a
heartbeat's answer. At the regular interval (5 s) every step of a rebalance waits for the
next heartbeat: a first member gives partitions up at its next heartbeat, and only the
heartbeat after that hands them on. kgc tells a member to come back within
`SETTLING_HEARTBEAT_MS` while it waits for partitions that others hold, and while its
group's target assignment changed within the last regular interval. Kafka's coordinator
answers the regular interval throughout (a departure kgc takes on purpose)."""

from __future__ import annotations

import pytest

from coordinator.group.consumer.manager import SETTLING_HEARTBEAT_MS
from tests.support.group_context import GroupTestContext
from tests.support.group_scenarios import owners_are_unique

START_MS = 1_000_000
REGULAR_MS = 5_000


@pytest.fixture
def ctx() -> GroupTestContext:
    context = GroupTestContext(start_ms=START_MS, consumer_assignment_interval_ms=1_000)
    context.set_topics(t=6)
    return context


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
