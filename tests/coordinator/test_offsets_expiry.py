"""Offset retention and expiry (KIP-211, REFERENCE §3.7), one test per kind of group."""

from coordinator.group.timer import expire_offsets_key
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

DAY_MS = 24 * 3600 * 1000
CHECK_MS = 600_000


def offsets(ctx, group_id="g"):
    return {(t.name, p.partition): p.offset for t in ctx.fetch(group_id).topics for p in t.partitions}


def loaded(ctx):
    """The expiry job is armed when a partition loads."""
    fresh = ctx.reload()
    assert fresh.deadline_in(expire_offsets_key()) == CHECK_MS
    return fresh


def test_simple_group_offsets_expire_by_commit_time_and_the_group_is_deleted():
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    ctx.commit(offsets=(("t", 0, 1, None),))
    ctx.clock.advance(DAY_MS // 2)
    ctx.commit(offsets=(("t", 1, 1, None),))
    ctx = loaded(ctx)
    ctx.sleep(DAY_MS // 2)                             # partition 0 is a day old, partition 1 half
    assert offsets(ctx) == {("t", 1): 1}
    ctx.sleep(DAY_MS // 2)
    assert offsets(ctx) == {} and "g" not in ctx.shard.groups
    assert ctx.written[-1].key.group == "g" and ctx.written[-1].value is None


def test_empty_consumer_group_offsets_expire_counting_from_when_it_became_empty():
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    [m] = ctx.stable_group(1)
    ctx.commit(member_id=m, generation_id=1)
    ctx.clock.advance(DAY_MS)                          # a day of being Stable does not count
    ctx.heartbeat(member_id=m)
    ctx.leave(members=[(m, None)])
    assert ctx.state() == "Empty"
    ctx = loaded(ctx)
    ctx.sleep(DAY_MS - CHECK_MS)
    assert offsets(ctx) == {("t", 0): 10}
    ctx.sleep(CHECK_MS)
    assert offsets(ctx) == {} and "g" not in ctx.shard.groups


def test_stable_consumer_group_expires_only_offsets_of_unsubscribed_topics():
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    [m] = ctx.stable_group(1, protocols=(("range", subscription("t")),), session_timeout_ms=1_800_000)
    ctx.commit(member_id=m, generation_id=1, offsets=(("t", 0, 1, None), ("gone", 0, 2, None)))
    ctx = loaded(ctx)
    for _ in range(DAY_MS // 1_500_000 + 1):           # keep the member alive for a day
        ctx.sleep(1_500_000)
        ctx.heartbeat(member_id=m)
    assert offsets(ctx) == {("t", 0): 1}
    assert ctx.state() == "Stable"


def test_rebalancing_group_offsets_never_expire():
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    long = dict(session_timeout_ms=1_800_000, rebalance_timeout_ms=3 * DAY_MS)
    [m] = ctx.stable_group(1, **long)
    ctx.commit(member_id=m, generation_id=1, offsets=(("gone", 0, 2, None),))
    ctx.join_dynamic(client_id="new", **long)          # starts a rebalance m never rejoins
    for _ in range(2 * DAY_MS // 1_500_000 + 1):
        ctx.sleep(1_500_000)
        ctx.heartbeat(member_id=m)                     # REBALANCE_IN_PROGRESS, session kept
    assert ctx.state() == "PreparingRebalance"
    assert offsets(ctx) == {("gone", 0): 2}


def test_non_consumer_protocol_group_with_members_keeps_its_offsets():
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    [m] = ctx.stable_group(1, protocol_type="connect", session_timeout_ms=1_800_000)
    ctx.commit(member_id=m, generation_id=1)
    for _ in range(2 * DAY_MS // 1_500_000 + 1):
        ctx.sleep(1_500_000)
        ctx.heartbeat(member_id=m)
    assert offsets(ctx) == {("t", 0): 10}


def test_explicit_expire_timestamp_wins_over_retention():
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    ctx.commit(version=2, retention_time_ms=60_000)
    ctx = loaded(ctx)
    ctx.sleep(CHECK_MS)
    assert offsets(ctx) == {}


def test_empty_group_without_offsets_is_deleted_at_the_next_check():
    ctx = GroupTestContext()
    ctx.join()                                         # only MEMBER_ID_REQUIRED: an empty group record
    ctx = loaded(ctx)
    assert ctx.state() == "Empty"
    ctx.sleep(CHECK_MS)
    assert "g" not in ctx.shard.groups
    assert ctx.deadline_in(expire_offsets_key()) == CHECK_MS


def test_a_v1_commit_timestamp_is_what_retention_counts_from():
    """OffsetCommit v1 names the commit time; Kafka 3.x stored it, so a simple group's
    offset committed "a day ago" expires at the next check."""
    ctx = GroupTestContext(offsets_retention_ms=DAY_MS)
    now = ctx.clock.now_ms()
    ctx.commit(version=1, offsets=(("t", 0, 1, None), ("t", 1, 1, None)),
               commit_timestamps={("t", 0): now - DAY_MS})
    ctx = loaded(ctx)
    ctx.sleep(CHECK_MS)
    assert offsets(ctx) == {("t", 1): 1}
