"""The request path's `submit_write`/`submit_read`: an idle partition runs the op inline
and answers without a future when nothing has to become durable; anything else keeps
the queue's order and the durability rule. The store is `manual_commit`, so nothing is
durable until the test says so."""

from __future__ import annotations

import asyncio

from coordinator.group.result import Reply, Result
from protocol.errors import ApiError, ErrorCode
from tests.coordinator.test_runtime import P, Parker, respond, settle


async def test_an_answer_without_records_on_an_idle_partition_comes_back_at_once(harness):
    outcome = harness.partition.submit_write(respond(response="beat"))
    assert outcome == "beat"
    assert harness.partition._waiters == set()     # no future was made for it


async def test_a_write_with_records_runs_inline_but_answers_only_once_durable(harness, store):
    outcome = harness.partition.submit_write(respond("a"))
    assert isinstance(outcome, asyncio.Future)
    assert harness.shard.replayed == [(0, "a", "v")]    # ran inline, before any loop turn
    await settle()
    assert not outcome.done()
    store.commit(P, 0)
    assert await outcome == "ok"


async def test_an_answer_behind_a_pending_batch_waits_for_it_in_order(harness, store):
    first = harness.partition.submit_write(respond("a"))
    # not idle now: this one takes the queue and, having no records, parks behind "a"
    second = harness.partition.submit_write(respond(response="beat"))
    read = harness.partition.submit_read(lambda shard: list(shard.replayed))
    await settle()
    assert isinstance(second, asyncio.Future) and not second.done() and not read.done()
    store.commit(P, 0)
    assert await asyncio.gather(first, second, read) == ["ok", "beat", [(0, "a", "v")]]
    # idle again: answered inline
    assert harness.partition.submit_write(respond(response="beat")) == "beat"


async def test_a_parked_request_gets_a_future_that_a_later_reply_completes(harness, store):
    parker = Parker()
    parked = harness.partition.submit_write(parker)
    assert isinstance(parked, asyncio.Future) and not parked.done()
    answer = harness.partition.submit_write(respond(response="leader", replies=[Reply(parker.handles[0], "one")]))
    assert answer == "leader"
    await settle()
    assert await parked == "one"


async def test_an_inline_read_returns_its_value(harness):
    assert harness.partition.submit_read(lambda shard: "value") == "value"


async def test_an_op_refusing_inline_raises_to_the_caller_and_leaves_the_partition_serving(harness):
    def refuse(shard, handle):
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)

    try:
        harness.partition.submit_write(refuse)
    except ApiError as exc:
        assert exc.code is ErrorCode.UNKNOWN_MEMBER_ID
    else:
        raise AssertionError("the refusal was swallowed")
    assert harness.partition.submit_write(respond(response="still here")) == "still here"


async def test_after_commit_of_an_inline_answer_runs_at_once_when_nothing_is_pending(harness):
    ran = []

    def after() -> Result:
        ran.append(True)
        return Result()

    assert harness.partition.submit_write(respond(response="ok", after_commit=after)) == "ok"
    assert ran == [True]
