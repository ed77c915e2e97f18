"""Fault isolation in the partition runtime: an op, a timer op or an after-commit step
that raises, or a Result whose records cannot be serialized, fails that operation only.
Its own request gets the exception, requests its Result would have answered get
UNKNOWN_MEMBER_ID, the shard is asked to isolate the op's scope, and the partition keeps
serving (it fails only on storage errors, on replay errors, or when isolation itself fails)."""

from __future__ import annotations

import pytest

from coordinator.common.result import Reply, Result
from coordinator.runtime.partition_state import PartitionState
from protocol.errors import ApiError, ErrorCode
from tests.support.runtime_harness import P, Parker, rec, respond, settle
from tests.support.waiting import wait_until


def boom(shard, handle):
    raise RuntimeError("injected fault")


async def test_an_op_that_raises_fails_its_request_and_isolates_its_scope(harness, store):
    # given a partition with durable state
    first = harness.write(respond("a"))
    await settle()
    store.commit(P, 0)
    await first
    # when an op on group g raises
    with pytest.raises(RuntimeError, match="injected fault"):
        await harness.write(boom, scope="g")
    # then the shard isolates g and the partition keeps serving
    assert harness.shard.isolated == ["g"]
    assert harness.partition.state is PartitionState.ACTIVE
    assert harness.partition.stats.failures == 0 and harness.partition.stats.op_failures == 1
    task = harness.write(respond("b"))
    await settle()
    store.commit(P, 1)
    assert await task == "ok"


async def test_an_inline_op_that_raises_is_isolated_too(harness):
    with pytest.raises(RuntimeError):
        harness.partition.submit_write(boom, "g")
    assert harness.shard.isolated == ["g"]
    assert harness.partition.state is PartitionState.ACTIVE


async def test_an_api_error_is_a_refusal_not_a_fault(harness):
    def refuse(shard, handle):
        raise ApiError(ErrorCode.INVALID_REQUEST)

    with pytest.raises(ApiError):
        await harness.write(refuse, scope="g")
    assert harness.shard.isolated == []


async def test_the_isolation_result_is_written_and_answers_parked_requests(harness, store):
    # given a parked request and a shard whose isolation answers it and writes a reset record
    parker = Parker()
    parked = harness.write(parker, scope="g")
    await settle()
    harness.shard.isolation = Result(records=(rec("reset-g"),),
                                     replies=(Reply(parker.handles[0], ApiError(ErrorCode.UNKNOWN_MEMBER_ID)),))
    # when an op on g raises
    failed = harness.write(boom, scope="g")
    await settle()
    # then the reset is replayed and appended, and the parked request answered once it is durable
    assert harness.shard.keys() == ["reset-g"]
    store.commit(P, 0)
    with pytest.raises(ApiError) as err:
        await parked
    assert err.value.code is ErrorCode.UNKNOWN_MEMBER_ID
    with pytest.raises(RuntimeError):
        await failed


async def test_unserializable_records_write_nothing_and_fail_only_their_op(harness, store):
    # given a parked request the failing op would answer
    parker = Parker()
    parked = harness.write(parker, scope="g")
    await settle()

    def unserializable(shard, handle):
        return Result(records=(rec("ok-record"), rec("#too-long")), response="never",
                      replies=(Reply(parker.handles[0], "joined"),))

    # when the op's records cannot be serialized
    with pytest.raises(ValueError, match="cannot serialize"):
        await harness.write(unserializable, scope="g")
    # then nothing was replayed or appended, the other request is told to rejoin, g is isolated
    assert harness.shard.replayed == []
    assert store.end_offset(P) == 0
    with pytest.raises(ApiError) as err:
        await parked
    assert err.value.code is ErrorCode.UNKNOWN_MEMBER_ID
    assert harness.shard.isolated == ["g"]
    assert harness.partition.state is PartitionState.ACTIVE
    # and the offsets the next write gets are the ones the log gives
    task = harness.write(respond("c"))
    await settle()
    store.commit(P, 0)
    assert await task == "ok"
    assert harness.shard.replayed == [(0, "c", "v")]


async def test_a_timer_op_that_raises_is_isolated_by_its_key(harness):
    def arm(shard, handle):
        shard.timer.schedule(("join", "g"), 0, lambda: (_ for _ in ()).throw(RuntimeError("timer fault")))
        return Result(response="armed")

    assert await harness.write(arm) == "armed"
    await wait_until(lambda: harness.shard.isolated, what="the timer's key isolated")
    assert harness.shard.isolated == [("join", "g")]
    assert harness.partition.state is PartitionState.ACTIVE


async def test_an_after_commit_step_that_raises_is_isolated_with_its_ops_scope(harness, store):
    def after():
        raise RuntimeError("after-commit fault")

    task = harness.write(respond("a", after_commit=after), scope="g")
    await settle()
    store.commit(P, 0)
    assert await task == "ok"
    await settle()
    assert harness.shard.isolated == ["g"]
    assert harness.partition.state is PartitionState.ACTIVE


async def test_a_shard_that_cannot_isolate_a_fault_fails_the_partition(harness):
    harness.shard.isolation = RuntimeError("isolation fault")
    with pytest.raises(RuntimeError):
        await harness.write(boom, scope="g")
    assert harness.partition.stats.failures == 1
    await settle()
    assert len(harness.shards) == 2     # dropped and reloaded from the durable log
