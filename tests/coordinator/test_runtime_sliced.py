"""Sliced ops (`common.result.Slices`): a request's op whose records are made a slice at a
time. The partition's executor is the op's until it ends, the loop runs between slices,
and the records are replayed and appended as one batch, all or nothing."""

from __future__ import annotations

import asyncio

from coordinator.common.result import Result
from coordinator.runtime.api import PartitionNotActive
from coordinator.runtime.partition_state import PartitionState
from protocol.errors import ApiError, ErrorCode
from tests.support.runtime_harness import P, Parker, rec, respond, settle


def sliced(slices: int, per_slice: int, *, fail_at: int | None = None, progress: list | None = None,
           response="sliced", tail: tuple[str, ...] = ()):
    """An op returning `Slices`: `slices` slices of `per_slice` records, keys "s<i>-<j>";
    it raises at slice `fail_at`; `progress` hears of each slice made."""
    def op(shard, handle):
        def steps():
            for i in range(slices):
                if i == fail_at:
                    raise ValueError("injected fault in a slice")
                if progress is not None:
                    progress.append(i)
                yield tuple(rec(f"s{i}-{j}") for j in range(per_slice))
            return Result(records=tuple(rec(k) for k in tail), response=response)
        return steps()
    return op


async def test_sliced_op_writes_one_batch_and_answers_once_it_is_durable(harness, store):
    task = harness.write(sliced(3, 2, tail=("last",)))
    await settle()
    expected = ["s0-0", "s0-1", "s1-0", "s1-1", "s2-0", "s2-1", "last"]
    assert harness.shard.keys() == expected
    assert not task.done()
    store.commit(P, 6)
    assert await task == "sliced"
    assert [[r.key.decode() for r in batch.records] for batch in store.read(P)] == [expected]


async def test_the_loop_runs_between_slices_and_other_ops_wait_for_the_whole_op(harness, store):
    progress: list[int] = []
    big = harness.write(sliced(5, 1, progress=progress))
    while not progress:
        await asyncio.sleep(0)
    # a write and a read submitted while the sliced op is under way...
    assert progress != list(range(5))
    later = harness.write(respond("after"))
    seen = harness.partition.submit_read(lambda shard: shard.keys())
    assert isinstance(seen, asyncio.Future)     # not run inline while the executor is held
    await settle()
    # ...run after it, and see all of its records
    assert harness.shard.keys() == [f"s{i}-0" for i in range(5)] + ["after"]
    store.commit(P, 5)
    assert await asyncio.gather(big, later) == ["sliced", "ok"]
    assert await seen == [f"s{i}-0" for i in range(5)]


async def test_a_fault_in_a_slice_fails_that_op_only_and_writes_nothing(harness, store):
    task = harness.write(sliced(4, 3, fail_at=2), scope="attacked")
    await settle()
    assert task.done() and isinstance(task.exception(), ValueError)
    assert harness.shard.replayed == [] and harness.shard.isolated == ["attacked"]
    assert harness.partition.state is PartitionState.ACTIVE
    after = harness.write(respond("next"))
    await settle()
    store.commit(P, 0)
    assert await after == "ok"
    assert harness.shard.keys() == ["next"] and store.end_offset(P) == 1


async def test_a_refusal_in_a_slice_is_the_requests_answer(harness):
    def op(shard, handle):
        def steps():
            yield (rec("a"),)
            raise ApiError(ErrorCode.INVALID_REQUEST, "refused")
        return steps()
    task = harness.write(op)
    await settle()
    assert task.exception().code == ErrorCode.INVALID_REQUEST
    assert harness.shard.isolated == [] and harness.shard.replayed == []


async def test_a_partition_failing_under_a_sliced_op_answers_it_and_reloads(harness, store):
    progress: list[int] = []
    task = harness.write(sliced(50, 1, progress=progress))
    while not progress:
        await asyncio.sleep(0)
    first_shard = harness.shard
    harness.partition.fail(RuntimeError("the store found damage"))
    await settle()
    assert task.done() and task.exception() is not None
    assert len(progress) < 50                   # abandoned, not run to the end
    await harness.partition.wait_loaded()
    await settle()
    assert harness.partition.state is PartitionState.ACTIVE and harness.shard is not first_shard
    assert harness.shard.replayed == [] and store.end_offset(P) == 0


async def test_an_after_commit_released_during_a_sliced_op_runs_when_it_ends(harness, store):
    ran: list[list[str]] = []

    def after():
        ran.append(harness.shard.keys())
        return Result(records=(rec("after"),))
    parker = Parker()
    first = harness.write(respond("first", after_commit=after))
    await settle()
    progress: list[int] = []
    big = harness.write(sliced(5, 1, progress=progress))
    parker_task = harness.write(parker)
    while not progress:
        await asyncio.sleep(0)
    store.commit(P, 0)          # "first" is durable while the sliced op holds the executor
    assert await first == "ok"
    assert ran == []
    await settle()
    assert ran == [["first"] + [f"s{i}-0" for i in range(5)]]
    assert harness.shard.keys()[-1] == "after"
    store.commit(P, 6)
    assert await big == "sliced"
    parker_task.cancel()


async def test_closing_waits_for_a_sliced_op_under_way_and_its_batch(harness, store):
    progress: list[int] = []
    big = harness.write(sliced(20, 1, progress=progress))
    while not progress:
        await asyncio.sleep(0)
    closing = asyncio.ensure_future(harness.partition.close(drain_timeout_s=5))
    for _ in range(1_000):      # the op goes on to its end while the close waits
        if store.end_offset(P) == 20:
            break
        await asyncio.sleep(0)
    assert not closing.done() and not big.done()
    store.commit(P, 19)
    await asyncio.wait_for(closing, 5)
    assert await big == "sliced"
    assert len(progress) == 20 and [r.offset for b in store.read(P) for r in b.records] == list(range(20))


async def test_a_partition_failing_before_a_sliced_op_starts_answers_it_and_writes_nothing(harness, store, caplog):
    answer = harness.partition.submit_write(sliced(3, 1))      # run inline: its slices start next turn
    harness.partition.fail(RuntimeError("the store found damage"))
    await settle()
    assert isinstance(answer.exception(), PartitionNotActive)
    await harness.partition.wait_loaded()
    await settle()
    assert harness.partition.state is PartitionState.ACTIVE
    assert harness.shard.replayed == [] and store.end_offset(P) == 0
    assert "sliced write failed" not in caplog.text
