"""The answer timeout (Kafka's offsets.commit.timeout.ms): a client's request whose answer
waits on a write that does not become durable is answered `WriteTimedOut` once the timeout
has passed since its answer was parked, while the write goes on; the runtime's own
requests wait however long it takes. Loop time is simulated (looptime)."""

from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.api_key import ApiKey

from coordinator.common.result import Reply
from coordinator.runtime.api import WriteTimedOut
from coordinator.runtime.partition_state import PartitionState
from coordinator.service.group_coordinator import error_code_for
from protocol.errors import ErrorCode
from storage.memory_store import MemoryLogStore
from tests.support.runtime_harness import Harness, P, Parker, respond, settle

pytestmark = pytest.mark.looptime

TIMEOUT_S = 5.0


async def times_out_in(answer: asyncio.Future, seconds: float) -> None:
    """`answer` is still unanswered just before `seconds` from now, and WriteTimedOut just after."""
    await asyncio.sleep(seconds - 0.1)
    assert not answer.done()
    await asyncio.sleep(0.2)
    with pytest.raises(WriteTimedOut):
        answer.result()


@pytest.fixture
async def slow(store: MemoryLogStore):
    h = Harness(store, [1_000], answer_timeout_s=TIMEOUT_S)
    await h.start()
    yield h
    await h.partition.close(drain_timeout_s=0)


async def test_a_clients_write_not_durable_in_time_is_answered_write_timed_out_and_the_write_goes_on(slow, store):
    answer = slow.partition.submit_write(respond("a"))
    await times_out_in(answer, TIMEOUT_S)
    # the write goes on: once durable, what it wrote stands and the partition serves
    store.commit(P, 0)
    await settle()
    assert slow.shard.replayed == [(0, "a", "v")]
    assert slow.partition.state is PartitionState.ACTIVE
    assert await slow.partition.read(lambda shard: shard.keys()) == ["a"]


async def test_a_read_behind_a_write_not_durable_in_time_is_answered_write_timed_out(slow, store):
    slow.partition.submit_write(respond("a"))
    read = slow.partition.submit_read(lambda shard: shard.keys())
    await times_out_in(read, TIMEOUT_S)


async def test_the_runtimes_own_write_waits_past_the_timeout(slow, store):
    own = slow.write(respond("a", response="written"))
    await asyncio.sleep(TIMEOUT_S * 3)
    assert not own.done()
    store.commit(P, 0)
    assert await own == "written"


async def test_each_answer_is_due_a_timeout_after_it_was_parked(slow, store):
    # given a first write made durable in time, and a second parked later
    first = slow.partition.submit_write(respond("a"))
    await asyncio.sleep(1)
    store.commit(P, 0)
    await settle()
    assert first.result() == "ok"
    await asyncio.sleep(3)
    second = slow.partition.submit_write(respond("b"))
    # then the first's deadline (1 s from now) leaves it alone, and its own answers it
    await times_out_in(second, TIMEOUT_S)


async def test_a_parked_requests_answer_is_due_from_when_its_reply_was_parked(slow, store):
    # given a request parked by its op (a JoinGroup waiting for the others) for longer than
    # the timeout: it does not wait on durability, so nothing answers it
    parker = Parker()
    parked = slow.partition.submit_write(parker)
    await asyncio.sleep(TIMEOUT_S * 2)
    assert not parked.done()
    # when a write answers it and that write is not durable in time
    slow.partition.submit_write(respond("g", replies=[Reply(parker.handles[0], "joined")]))
    await times_out_in(parked, TIMEOUT_S)


async def test_without_an_answer_timeout_a_clients_write_waits(harness, store):
    answer = harness.partition.submit_write(respond("a"))
    await asyncio.sleep(60)
    assert not answer.done()
    store.commit(P, 0)
    assert await answer == "ok"


def test_a_write_timed_out_is_a_retriable_error_in_the_apis_shape():
    # Kafka: COORDINATOR_NOT_AVAILABLE, and NOT_COORDINATOR for OffsetFetch (clients before
    # 3.9 retry neither REQUEST_TIMED_OUT nor, on a fetch, COORDINATOR_NOT_AVAILABLE)
    exc = WriteTimedOut("partition 0: the write is not durable after 5 s")
    assert error_code_for(ApiKey.OffsetCommit, exc) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert error_code_for(ApiKey.JoinGroup, exc) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert error_code_for(ApiKey.OffsetFetch, exc) is ErrorCode.NOT_COORDINATOR
