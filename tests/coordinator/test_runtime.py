"""The partition runtime with a dummy shard over string records (Kafka's
`MockCoordinatorShard` + `InMemoryPartitionWriter(autoCommit=false)` pattern): nothing is
durable until the test commits it, so every deferral is visible."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.common.result import Reply, Result
from coordinator.runtime.api import PartitionLoading, PartitionNotActive, RuntimeClosed
from coordinator.runtime.loop_timer import LoopTimer, TimerEntry
from coordinator.runtime.partition import PartitionRuntime
from coordinator.runtime.partition_state import PartitionState
from coordinator.runtime.runtime import CoordinatorRuntime
from protocol.errors import ApiError, ErrorCode
from storage.api import LogRecord, StorageError
from storage.memory_store import MemoryLogStore
from tests.support.runtime_harness import DummyShard, Harness, P, Parker, StrSerde, rec, respond, settle


async def test_response_is_released_only_once_its_batch_is_durable(harness, store):
    # given a write whose records are replayed at once
    task = harness.write(respond("a", "b"))
    await settle()
    assert harness.shard.replayed == [(0, "a", "v"), (1, "b", "v")]
    assert not task.done()
    # when the batch becomes durable
    store.commit(P, 1)
    # then the response is released
    assert await task == "ok"


async def test_replies_are_released_together_when_the_covering_batch_is_durable(harness, store):
    # given two parked requests and a write that answers both
    parker = Parker()
    parked = [harness.write(parker), harness.write(parker)]
    await settle()
    answer = respond("g", response="leader",
                     replies=[Reply(parker.handles[0], "one"), Reply(parker.handles[1], "two")])
    task = harness.write(answer)
    await settle()
    assert not any(t.done() for t in [*parked, task])
    # when the batch is durable, everyone is answered
    store.commit(P, 0)
    assert await asyncio.gather(*parked, task) == ["one", "two", "leader"]


async def test_one_durability_update_releases_every_batch_it_covers(harness, store):
    first, second = harness.write(respond("a")), harness.write(respond("b"))
    await settle()
    store.commit(P, 1)
    assert await asyncio.gather(first, second) == ["ok", "ok"]


async def test_result_without_records_waits_for_the_previous_write(harness, store):
    # given a pending write
    pending = harness.write(respond("a", response="written"))
    await settle()
    # when a result without records answers
    empty = harness.write(respond(response="empty"))
    await settle()
    # then its response waits for the pending write to be durable
    assert not empty.done()
    store.commit(P, 0)
    assert await asyncio.gather(pending, empty) == ["written", "empty"]


async def test_result_without_records_is_answered_at_once_when_nothing_is_pending(harness):
    assert await asyncio.wait_for(harness.write(respond(response="now")), 1) == "now"


async def test_read_sees_only_durable_state(harness, store):
    harness.write(respond("a"))
    await settle()
    read = harness.read(lambda shard: shard.keys())
    await settle()
    assert not read.done()
    store.commit(P, 0)
    assert await read == ["a"]


async def test_records_are_appended_but_not_replayed_when_replay_is_false(harness, store):
    task = harness.write(respond("snapshot", replay=False))
    await settle()
    store.commit(P, 0)
    await task
    assert harness.shard.replayed == []
    assert [r.key for b in store.read(P, 0) for r in b.records] == [b"snapshot"]


async def test_after_commit_runs_after_durability_and_its_result_takes_the_write_path(harness, store):
    calls = []
    parker = Parker()
    parked = harness.write(parker)
    await settle()

    def after_commit():
        calls.append(harness.shard.keys())
        return Result(records=(rec("assigned"),), replies=(Reply(parker.handles[0], "assignment"),))

    sync = harness.write(respond("group-metadata", response="leader", after_commit=after_commit))
    await settle()
    # the after-commit step waits for the batch
    assert calls == []
    store.commit(P, 0)
    await settle()
    # it ran once the batch was durable, after this request's own response was released
    assert calls == [["group-metadata"]]
    assert sync.done() and await sync == "leader"
    # its own records are replayed and its replies wait for their own batch
    assert harness.shard.keys() == ["group-metadata", "assigned"]
    assert not parked.done()
    store.commit(P, 1)
    assert await parked == "assignment"


async def test_failed_write_fails_parked_requests_and_reloads_only_the_durable_prefix(harness, store):
    # given one durable write, one pending write and one parked request
    durable = harness.write(respond("a"))
    await settle()
    store.commit(P, 0)
    await durable
    pending = harness.write(respond("b"))
    parked = harness.write(Parker())
    await settle()
    old_shard = harness.shard
    assert old_shard.keys() == ["a", "b"]
    # when the pending write fails
    store.fail(P, StorageError("disk full"))
    # then every waiting request gets PartitionNotActive
    for task in (pending, parked):
        with pytest.raises(PartitionNotActive):
            await task
    assert old_shard.unloaded
    # and the partition reloads from the durable log: "b" was never durable
    await wait_for_state(harness.partition, PartitionState.ACTIVE)
    assert harness.shard is not old_shard
    assert harness.shard.keys() == ["a"]
    assert harness.partition.stats.failures == 1
    # and serves again, at the offset after the durable prefix
    task = harness.write(respond("c"))
    await settle()
    store.commit(P, 1)
    assert await task == "ok"
    assert harness.shard.replayed[-1] == (1, "c", "v")


async def test_requests_queued_behind_a_failed_write_get_not_coordinator(harness, store):
    store.fail(P, StorageError("I/O error"))
    first = harness.write(respond("a"))
    queued = harness.write(respond("b"))
    for task in (first, queued):
        with pytest.raises(PartitionNotActive):
            await task
    await wait_for_state(harness.partition, PartitionState.ACTIVE)
    assert harness.shard.keys() == []


async def test_a_record_that_replay_rejects_fails_the_partition(harness, store):
    task = harness.write(respond("ok-record", "poison"))
    with pytest.raises(PartitionNotActive):
        await task
    await wait_for_state(harness.partition, PartitionState.ACTIVE)
    # nothing of the rejected batch was appended
    assert harness.shard.keys() == []
    assert store.end_offset(P) == 0


async def test_an_op_raising_answers_only_its_own_request(harness):
    def refuse(shard, handle):
        raise ApiError(ErrorCode.ILLEGAL_GENERATION)

    with pytest.raises(ApiError) as err:
        await harness.write(refuse)
    assert err.value.code is ErrorCode.ILLEGAL_GENERATION
    assert harness.partition.state is PartitionState.ACTIVE


async def test_an_op_failing_after_its_client_went_away_leaves_the_partition_alone(harness):
    def refuse(shard, handle):
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)

    task = harness.write(refuse)
    await asyncio.sleep(0)      # enqueued, not yet run
    task.cancel()
    await settle()
    assert task.cancelled()
    assert harness.partition.state is PartitionState.ACTIVE
    assert harness.partition.stats.failures == 0


async def test_requests_for_a_loading_partition_raise_partition_loading(store):
    h = Harness(store, [0])
    h.partition.start()
    with pytest.raises(PartitionLoading):
        await h.partition.write(respond("a"))
    with pytest.raises(PartitionLoading):
        await h.partition.read(lambda shard: None)
    await h.partition.wait_loaded()
    assert h.partition.state is PartitionState.ACTIVE
    assert h.shard.loaded
    await h.partition.close(drain_timeout_s=0)


async def test_requests_before_start_raise_partition_not_active(store):
    h = Harness(store, [0])
    with pytest.raises(PartitionNotActive):
        await h.partition.write(respond("a"))


async def test_replies_to_a_handle_whose_client_went_away_are_ignored(harness, store):
    parker = Parker()
    gone = harness.write(parker)
    await settle()
    gone.cancel()
    await settle()
    task = harness.write(respond("g", replies=[Reply(parker.handles[0], "late")]))
    await settle()
    store.commit(P, 0)
    assert await task == "ok"
    assert gone.cancelled()
    await settle()
    assert harness.partition.state is PartitionState.ACTIVE
    assert harness.partition.stats.failures == 0


@pytest.mark.looptime
async def test_expired_timer_enqueues_its_op_on_the_partition_executor(harness, store):
    ran_in = []

    def expire():
        ran_in.append(asyncio.current_task())
        return Result(records=(rec("expired"),))

    def schedule(shard, handle):
        shard.timer.schedule("heartbeat-g-m", 5_000, expire)
        return Result(response="scheduled")

    assert await harness.write(schedule) == "scheduled"
    await asyncio.sleep(4.9)
    assert ran_in == []
    await asyncio.sleep(0.2)
    # the op ran as an event of the partition's consumer task, not inside the loop callback
    assert [task.get_name() for task in ran_in] == [f"partition-{P}"]
    assert harness.shard.keys() == ["expired"]
    assert not harness.shard.timer.is_scheduled("heartbeat-g-m")


@pytest.mark.looptime
async def test_rescheduled_timer_replaces_the_old_deadline(harness):
    fired = []

    def schedule(delay_ms, tag):
        def op(shard, handle):
            shard.timer.schedule("session", delay_ms, lambda: fired.append(tag) or Result())
            return Result(response="ok")
        return op

    await harness.write(schedule(1_000, "old"))
    await harness.write(schedule(3_000, "new"))
    await asyncio.sleep(2)
    assert fired == []
    await asyncio.sleep(2)
    assert fired == ["new"]


@pytest.mark.looptime
async def test_an_expiry_overtaken_by_a_reschedule_is_not_run():
    # given a timer that expired but whose op has not run yet
    expired: list[TimerEntry] = []
    timer = LoopTimer(asyncio.get_running_loop(), lambda t, entry: expired.append(entry))
    timer.schedule("heartbeat-g-m", 1_000, lambda: Result())
    await asyncio.sleep(1.5)
    [stale] = expired
    # when the key is rescheduled (a heartbeat arrived) before the expiry event runs
    timer.schedule("heartbeat-g-m", 1_000, lambda: Result())
    # then the stale expiry cannot claim the timer, and the new deadline still stands
    assert timer.claim(stale) is None
    assert timer.is_scheduled("heartbeat-g-m")
    await asyncio.sleep(1.5)
    assert len(expired) == 2 and timer.claim(expired[1]) is not None
    assert not timer.is_scheduled("heartbeat-g-m")


@pytest.mark.looptime
async def test_timers_are_cancelled_when_the_partition_fails(harness, store):
    fired = []

    def schedule(shard, handle):
        shard.timer.schedule(("join", "g"), 1_000, lambda: fired.append(1) or Result())
        return Result(response="ok")

    await harness.write(schedule)
    store.fail(P, StorageError("disk full"))
    with pytest.raises(PartitionNotActive):
        await harness.write(respond("a"))
    await asyncio.sleep(2)
    assert fired == []


async def test_close_answers_parked_requests_with_runtime_closed(harness, store):
    parked = harness.write(Parker())
    pending = harness.write(respond("a"))
    await settle()
    store.commit(P, 0)
    await harness.partition.close(drain_timeout_s=1)
    # the pending write drained; the parked join never got an answer and is closed
    assert await pending == "ok"
    with pytest.raises(RuntimeClosed):
        await parked
    assert harness.partition.state is PartitionState.CLOSED
    with pytest.raises(RuntimeClosed):
        await harness.partition.write(respond("b"))


async def test_load_skips_unknown_record_types_and_replays_the_rest(store):
    append_durable(store, [LogRecord(b"a", b"1"), LogRecord(b"?future-type", b"x"), LogRecord(b"b", None)])
    h = Harness(store, [0])
    await h.start()
    assert h.partition.state is PartitionState.ACTIVE
    assert h.shard.replayed == [(0, "a", "1"), (2, "b", None)]
    assert h.partition.stats.records_loaded == 3
    await h.partition.close(drain_timeout_s=0)


async def test_load_stops_at_an_undecodable_record(store):
    append_durable(store, [LogRecord(b"a", b"1"), LogRecord(b"!garbage", b"x")])
    h = Harness(store, [0])
    await h.start()
    assert h.partition.state is PartitionState.FAILED
    assert not h.shard.loaded
    with pytest.raises(PartitionNotActive):
        await h.partition.write(respond("a"))
    await h.partition.close(drain_timeout_s=0)


def append_durable(store: MemoryLogStore, records: list[LogRecord], partition: int = P) -> None:
    append = store.append(partition, records, 0)
    store.commit(partition, append.last_offset)


async def wait_for_state(partition: PartitionRuntime, state: PartitionState) -> None:
    for _ in range(200):
        if partition.state is state:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"partition stayed {partition.state}, expected {state}")


async def test_the_runtime_is_loaded_once_every_partition_is_active():
    store = MemoryLogStore(num_partitions=3)
    append_durable(store, [LogRecord(b"!garbage", b"x")], partition=2)
    runtime = CoordinatorRuntime(store, 3, clock=lambda: 0, shard_factory=DummyShard, serde=StrSerde())
    await runtime.start()
    await runtime.wait_loaded()
    assert [runtime.partition_state(p) for p in range(3)] == [
        PartitionState.ACTIVE, PartitionState.ACTIVE, PartitionState.FAILED]
    assert not runtime.all_loaded
    assert await runtime.write(1, respond("a")) == "ok"
    assert [s.records_appended for s in runtime.stats()] == [0, 1, 0]
    with pytest.raises(PartitionNotActive):
        await runtime.read(2, lambda shard: None)
    await runtime.close()
    with pytest.raises(RuntimeClosed):
        await runtime.write(0, respond("b"))


def test_the_runtime_refuses_a_store_with_another_partition_count():
    with pytest.raises(ValueError):
        CoordinatorRuntime(MemoryLogStore(num_partitions=3), 50, clock=lambda: 0, shard_factory=DummyShard,
                           serde=StrSerde())
