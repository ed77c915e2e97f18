"""`GroupShard.isolate`: after an operation on a group failed half-way, the group is put
back into a state it can serve from; and a member listing a protocol name twice supports
it once (the join that used to raise inside `vote` completes)."""

from __future__ import annotations

from coordinator.group.timer import expire_offsets_key, heartbeat_key, join_key, sync_key
from protocol.answers.classic import JoinAnswer
from protocol.errors import ApiError, ErrorCode
from tests.support.builders import subscription
from tests.support.group_context import GroupTestContext

RANGE = ("range", subscription("t"))


def test_isolating_a_group_removes_its_members_answers_parked_requests_and_writes_an_empty_generation():
    ctx = GroupTestContext()
    a, b = ctx.stable_group(2)
    # given a rebalance in progress: a parked, b not yet rejoined
    rejoin = ctx.join(member_id=a, client_id="c0")
    assert rejoin.response is None and ctx.state() == "PreparingRebalance"
    generation = ctx.group().generation
    # when an operation on the group failed
    result = ctx._apply(ctx.shard.isolate("g"))
    # then the parked request is told to rejoin, nobody is left, and the log says so
    assert rejoin.error == ErrorCode.UNKNOWN_MEMBER_ID
    group = ctx.group()
    assert ctx.state() == "Empty" and not group.members and group.generation == generation + 1
    assert [r.value.generation for r in result.records] == [generation + 1]
    assert result.records[0].value.members == ()
    for key in (heartbeat_key("g", a), heartbeat_key("g", b), join_key("g"), sync_key("g")):
        assert not ctx.timer.is_scheduled(key)
    # and the group serves again: a member joins and leads the next generation
    member, join = ctx.join_dynamic(client_id="c2")
    ctx.finish_join_phase()
    assert join.error == ErrorCode.NONE and join.response.leader == member


def test_isolating_by_a_groups_timer_key_resets_that_group_only():
    ctx = GroupTestContext()
    ctx.stable_group(1, group_id="g")
    ctx.stable_group(1, group_id="other")
    ctx._apply(ctx.shard.isolate(join_key("g")))
    assert ctx.state("g") == "Empty"
    assert ctx.state("other") == "Stable"


def test_replies_an_interrupted_handler_collected_are_answered_unknown_member_id():
    ctx = GroupTestContext()
    member, join = ctx.join_dynamic()
    # a handler collected a reply, then raised before handing it out
    group = ctx.group()
    ctx.shard.membership.answer_join(group, group.member(member), JoinAnswer(ErrorCode.NONE))
    result = ctx.shard.isolate("g")
    aborted = [r for r in result.replies if r.handle == join.handle]
    assert len(aborted) == 1 and isinstance(aborted[0].response, ApiError)
    assert aborted[0].response.code is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_failed_offsets_expiry_is_armed_again():
    ctx = GroupTestContext()
    ctx.timer.cancel(expire_offsets_key())
    ctx._apply(ctx.shard.isolate(expire_offsets_key()))
    assert ctx.timer.is_scheduled(expire_offsets_key())


def test_a_protocol_name_listed_twice_is_supported_once_and_the_join_completes():
    ctx = GroupTestContext()
    (healthy,) = ctx.stable_group(1, protocols=(RANGE,))
    # a second member lists "range" twice: supported by all, once each
    member, joined = ctx.join_dynamic(client_id="dup", protocols=(RANGE, RANGE))
    assert ctx.group().supported_protocols["range"] == 2
    rejoin = ctx.join(member_id=healthy, client_id="c0", protocols=(RANGE,))
    assert rejoin.error == ErrorCode.NONE and joined.error == ErrorCode.NONE
    assert rejoin.response.protocol_name == "range" and ctx.state() == "CompletingRebalance"

