"""The request path's `submit_write`/`submit_read`: with nothing queued the op runs
inline, and answers without a future when nothing has to become durable (or its batch
already is); anything else keeps the queue's order and the durability rule. The store
is `manual_commit`, so nothing is durable until the test says so."""

from __future__ import annotations

import asyncio

from coordinator.common.result import Reply, Result
from protocol.errors import ApiError, ErrorCode
from storage.api import Append
from storage.memory_store import MemoryLogStore
from tests.support.runtime_harness import Harness, P, Parker, respond, settle


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
    # "a" is pending: this one runs inline but, having no records, parks behind "a"
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


async def test_a_write_behind_a_pending_batch_runs_inline_and_answers_in_offset_order(harness, store):
    first = harness.partition.submit_write(respond("a"))
    second = harness.partition.submit_write(respond("b"))
    # both ran before any loop turn: no hop through the queue while "a" is pending
    assert harness.shard.replayed == [(0, "a", "v"), (1, "b", "v")]
    store.commit(P, 0)
    await settle()
    assert first.done() and not second.done()
    store.commit(P, 1)
    assert await asyncio.gather(first, second) == ["ok", "ok"]


class DurableOnAppend(MemoryLogStore):
    """A store that makes each batch durable within `append`, as the file store's inline
    write does under fsync `never`."""

    def append(self, partition, records, timestamp_ms) -> Append:
        append = super().append(partition, records, timestamp_ms)
        self.commit(partition, append.last_offset)
        return append


async def test_a_write_whose_batch_is_durable_on_append_is_answered_without_a_future():
    harness = Harness(DurableOnAppend(num_partitions=1, manual_commit=True), [1_000])
    await harness.start()
    try:
        assert harness.partition.submit_write(respond("a")) == "ok"
        assert harness.partition.submit_write(respond("b")) == "ok"
        assert harness.shard.replayed == [(0, "a", "v"), (1, "b", "v")]
    finally:
        await harness.partition.close(drain_timeout_s=0)


class FailsOnAppend(MemoryLogStore):
    """A store whose write fails within `append` (the inline write hit a full disk)."""

    def append(self, partition, records, timestamp_ms) -> Append:
        append = super().append(partition, records, timestamp_ms)
        self.fail(partition, OSError(28, "No space left on device"))
        return append


async def test_a_write_failing_within_append_fails_the_request_and_the_partition():
    harness = Harness(FailsOnAppend(num_partitions=1, manual_commit=True), [1_000])
    await harness.start()
    try:
        outcome = harness.partition.submit_write(respond("a"))
        assert isinstance(outcome, asyncio.Future)
        try:
            await outcome
        except Exception as exc:
            assert "partition" in str(exc)
        else:
            raise AssertionError("a failed write was answered")
        assert not harness.partition._parked
    finally:
        await harness.partition.close(drain_timeout_s=0)
