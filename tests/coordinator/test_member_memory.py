"""What a member costs: one session-timer op and key, reused by every heartbeat, shared
timeout ints, and pending sets that give back their tables once emptied (issue #6)."""

import sys

from coordinator.group.timer import heartbeat_key
from tests.support.group_context import GroupTestContext

NONE = 0


def _scheduled_op(ctx: GroupTestContext, key):
    return ctx.timer._live[key].op


def test_heartbeats_reschedule_the_members_own_op_under_its_own_key():
    ctx = GroupTestContext()
    [m] = ctx.stable_group(1)
    member = ctx.group().member(m)
    op = member.session_timer
    assert op.key == heartbeat_key("g", m)
    for _ in range(3):
        ctx.sleep(3_000)
        assert ctx.heartbeat(member_id=m).error == NONE
        assert _scheduled_op(ctx, heartbeat_key("g", m)) is op
    assert ctx.deadline_in(heartbeat_key("g", m)) == 10_000


def test_the_members_op_takes_over_the_timer_of_its_pending_id():
    ctx = GroupTestContext()
    first = ctx.join()
    member_id = first.response.member_id
    pending_op = _scheduled_op(ctx, heartbeat_key("g", member_id))
    ctx.join(member_id=member_id)
    member = ctx.group().member(member_id)
    assert _scheduled_op(ctx, heartbeat_key("g", member_id)) is member.session_timer is not pending_op
    assert [k for k in ctx.timer.keys() if k[0] == "heartbeat"] == [heartbeat_key("g", member_id)]


def test_a_member_that_stops_heartbeating_is_still_expired_by_its_own_op():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    ctx.sleep(9_000)
    ctx.heartbeat(member_id=a)
    assert ctx.sleep(1_000) == [heartbeat_key("g", b)]
    assert b not in ctx.group().members and a in ctx.group().members


def test_pending_sets_give_their_tables_back_once_every_member_synced():
    ctx = GroupTestContext()
    ctx.stable_group(10)
    group = ctx.group()
    assert not group.pending_join_members and not group.pending_sync_members
    assert sys.getsizeof(group.pending_join_members) == sys.getsizeof(set())
    assert sys.getsizeof(group.pending_sync_members) == sys.getsizeof(set())


def test_members_share_one_object_per_timeout_value():
    ctx = GroupTestContext()
    ids, sent = [], []
    for i in range(2):
        # Equal values from different requests are different objects, as off the wire.
        timeouts = {"session_timeout_ms": int("20000"), "rebalance_timeout_ms": int("30000")}
        sent.append(timeouts)
        ids.append(ctx.join_dynamic(client_id=f"c{i}", **timeouts)[0])
    assert sent[0]["session_timeout_ms"] is not sent[1]["session_timeout_ms"]
    ma, mb = (ctx.group().member(m) for m in ids)
    assert ma.session_timeout_ms == 20_000 and ma.rebalance_timeout_ms == 30_000
    assert ma.session_timeout_ms is mb.session_timeout_ms
    assert ma.rebalance_timeout_ms is mb.rebalance_timeout_ms
