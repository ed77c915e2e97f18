"""One `__consumer_offsets` partition: a serial executor around its shard.

Its states, and the moves between them, are in `partition_state.py`.
Requests are refused at once unless ACTIVE: LOADING raises `PartitionLoading`, INITIAL
and FAILED raise `PartitionNotActive`, a closing runtime raises `RuntimeClosed`.

Write path, in order; one consumer task runs the events, and an op never
awaits, so nothing else touches the shard while it runs:
1. `write(op)` makes a `FutureReplyHandle` and enqueues the event.
2. The consumer runs `result = op(shard, handle)`. When nothing is queued the op runs
   inline in `submit_write` instead (writes may still be waiting on durability: step 4
   holds its answer back just the same), and an answer that needs nothing more to be
   durable comes back without a future: one with no records when nothing is pending,
   one whose records the store wrote inline (durable at once under fsync `never`).
3. Its records are replayed into the shard at the offsets they will get (unless
   `result.replay` is False), then appended as one batch.
4. `result.response` (to this request's handle), every `Reply` and `after_commit` are
   parked under the batch's last offset. A Result without records is parked under the
   last pending write, if any, so no client sees state that is not yet durable (Kafka's
   empty-records branch of `append()`).
5. When the store reports the batch durable (in the store's own callback, through
   `EagerFuture.when_done`; the request futures are eager too, so the connection writes
   the answer in that same call), everything parked at or below that offset is released
   in offset order, and each `after_commit` runs right there, between
   events, its Result taking the same path from step 3.
6. If an append raises or its durability fails, the partition is FAILED: every waiting
   handle (parked or in the queue) gets `PartitionNotActive`, timers are cancelled, the
   shard is dropped, and the consumer recovers the store and reloads from the durable
   log. Nothing that was replayed but not made durable survives.

Fault isolation: an operation that fails is not a storage failure, and fails alone.
Every write carries a *scope* the shard understands (the group id a request names; a
timer's key; an `after_commit` inherits its op's). When an op, a timer op or an
`after_commit` raises (an `ApiError` is a refusal, not a fault), or returns records that
cannot be serialized, nothing of it is replayed or appended; its own request gets the
exception (the service answers UNKNOWN_SERVER_ERROR in the API's shape), the other
requests its Result would have answered get UNKNOWN_MEMBER_ID, and `shard.isolate(scope)`
returns the Result that resets that scope (a group whose soft state the op may have left
half-changed), applied like any other. Records are serialized before any is replayed,
so hard state never sees part of a failed op. The partition fails only when the store
does, when replay itself raises (hard state may then be half-applied), or when the
shard cannot isolate a fault.

Sliced ops: a request's op may return `Slices` (`common.result`) instead of a Result, for
work that grows with the request (an OffsetCommit of 100,000 partitions). The runtime
then holds the partition's executor (later events wait in the queue, nothing runs
inline, and an `after_commit` released meanwhile waits too) and does steps 2-3 a slice
at a time, letting the loop run between slices, so other partitions' requests (and
heartbeats, answered inline) keep going: it takes the records slice by slice and
serializes each, then replays them in slices, has the store prepare the batch in
slices (`LogStore.prepare`), and appends it as one batch; steps 4-6 are as above. Nothing
is replayed before every record is serialized, and the partition's other requests see
the op whole or not at all, as one batch is kept or lost whole by recovery.

Reads (`read(op)`) run on the same queue and return once every earlier write is durable
(inline, when the partition is idle).
A handle whose future is already done or cancelled (the client went away) is skipped.

Answer timeout (`answer_timeout_s`, Kafka's offsets.commit.timeout.ms): an answer to a
client's request (`submit_write`, `submit_read`; a parked request's too, once a Reply to
it is parked) that has waited on durability that long is answered `WriteTimedOut`, a
retriable error, while the write goes on. A store that cannot write (an upstream broker
gone, a disk that hangs) then holds a connection's later requests, heartbeats among them,
no longer than that, as in Kafka. The runtime's own reads and writes (`read`, `write`: a
load's, an adoption's) wait for durability however long it takes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from coordinator import metrics
from coordinator.common.result import Result, Slices
from coordinator.runtime.api import (
    PartitionLoading,
    PartitionNotActive,
    RuntimeClosed,
    Shard,
    WriteOp,
    WriteTimedOut,
)
from coordinator.runtime.loader import LoadError, RecordSerde, load_partition
from coordinator.runtime.loop_timer import LoopTimer, TimerEntry
from coordinator.runtime.partition_state import VALID_PREVIOUS, IllegalPartitionTransition, PartitionState
from coordinator.runtime.partition_stats import PartitionStats
from coordinator.runtime.replies import FutureReplyHandle, InlineHandle, Parked, Scope
from protocol.errors import ApiError, ErrorCode
from storage.api import Append, LogRecord, LogStore, StorageError, TxnBatch
from storage.eager_future import EagerFuture

log = logging.getLogger(__name__)

# Records a sliced op replays in one step before it lets the loop run others.
REPLAY_SLICE = 2_000

ShardFactory = Callable[[int, LoopTimer], Shard]


@dataclass(slots=True)
class _Event:
    run: Callable[[], None]
    future: asyncio.Future | None = field(default=None)


class RequestFuture(EagerFuture):
    """A client request's answer, which the answer timeout bounds while it waits on
    durability (the runtime's own futures are plain `EagerFuture`s)."""

    __slots__ = ()


_RELOAD = object()
# The scope of a Result that isolates a fault: if even it cannot be written, it is not
# isolated again.
_ISOLATING = object()


class PartitionRuntime:
    def __init__(self, partition: int, store: LogStore, shard_factory: ShardFactory,
                 serde: RecordSerde, clock: Callable[[], int], answer_timeout_s: float | None = None):
        self.partition = partition
        self.state = PartitionState.INITIAL
        self.stats = PartitionStats()
        self._store = store
        self._shard_factory = shard_factory
        self._serde = serde
        self._clock = clock
        # Set by `start`: nothing before it uses the loop.
        self._loop: asyncio.AbstractEventLoop
        self._queue: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._shard: Shard | None = None
        self._timer: LoopTimer | None = None
        self._closing = False
        self._closing_reason: Exception = RuntimeClosed("coordinator is shutting down")
        self._loaded = asyncio.Event()
        # Futures of requests still waiting for an answer, failed together on failure/close.
        self._waiters: set[asyncio.Future] = set()
        self._parked: deque[Parked] = deque()
        # Parked entries in the order they were parked, with the loop time their requests'
        # answers are due; one timer at a time walks them (`_answer_overdue`).
        self._answer_timeout_s = answer_timeout_s
        self._due: deque[tuple[float, Parked]] = deque()
        self._due_timer: asyncio.TimerHandle | None = None
        self._last_written = -1
        self._last_durable = -1
        # Bumped on every failure, so durability callbacks of a dead epoch do nothing.
        self._epoch = 0
        # A sliced op in progress: the executor is its until it ends.
        self._sliced: asyncio.Task | None = None
        # `after_commit`s released while a sliced op held the executor, run when it ends.
        self._deferred: list[tuple[Callable[[], Result], Scope]] = []

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._transition(PartitionState.LOADING)
        self._task = self._loop.create_task(self._consume(), name=f"partition-{self.partition}")

    async def wait_loaded(self) -> None:
        """Returns once the first load attempt has ended (ACTIVE or FAILED)."""
        await self._loaded.wait()

    async def close(self, drain_timeout_s: float = 5.0, reason: Exception | None = None) -> None:
        """Stop accepting, let queued events run and their writes become durable, then stop.
        What is still waiting is answered with `reason` (RuntimeClosed: kgc is stopping;
        PartitionNotActive: the partition moves to another instance)."""
        if self.state is PartitionState.CLOSED:
            return
        self._closing = True
        self._closing_reason = reason or RuntimeClosed("coordinator is shutting down")
        if self.state is PartitionState.ACTIVE:
            barrier = self._enqueue_read(lambda shard: None)
            try:
                await asyncio.wait_for(barrier, drain_timeout_s)
            except Exception as exc:
                log.warning("partition %d: closing without a full drain: %r", self.partition, exc)
        self._stop_serving(self._closing_reason)
        self._transition(PartitionState.CLOSED)
        if self._sliced is not None:
            self._sliced.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._loaded.set()

    # ---- requests --------------------------------------------------------------------

    async def write(self, op: WriteOp, scope: Scope = None) -> Any:
        self._check_serving()
        self.stats.writes += 1
        return await self._enqueue_write(op, scope)

    async def read(self, op: Callable[[Any], Any]) -> Any:
        self._check_serving()
        self.stats.reads += 1
        return await self._enqueue_read(op)

    def submit_write(self, op: WriteOp, scope: Scope = None) -> Any:
        """`write` without a coroutine, for the request path: the response itself when the
        op ran inline and its answer needs no durable write, otherwise a future of it."""
        if self._closing or self.state is not PartitionState.ACTIVE:
            self._check_serving()
        self.stats.writes += 1
        if self._queue.empty() and self._sliced is None:
            return self._write_inline(op, scope)
        return self._enqueue_write(op, scope, RequestFuture)

    def submit_read(self, op: Callable[[Any], Any]) -> Any:
        """`read` without a coroutine: the value itself when nothing is pending ahead of it."""
        self._check_serving()
        self.stats.reads += 1
        if self._idle():
            return op(self._shard)
        return self._enqueue_read(op, RequestFuture)

    def _enqueue_write(self, op: WriteOp, scope: Scope,
                       future_type: type[EagerFuture] = EagerFuture) -> asyncio.Future:
        handle = FutureReplyHandle(self._new_waiter(future_type))
        self._enqueue(_Event(lambda: self._run_write(op, handle, scope), handle.future))
        return handle.future

    def _idle(self) -> bool:
        # Nothing queued and nothing waiting on durability: an op run right here sees what
        # the consumer would see next, and since ops never await (and asyncio is one
        # thread) running it here is still serial. The consumer only runs events taken
        # from the queue, so an empty queue means it is not between two steps.
        return self._queue.empty() and self._sliced is None and self._settled()

    def _settled(self) -> bool:
        """Nothing waits on durability: an answer made now may go out now."""
        return not self._parked and self._last_written <= self._last_durable

    def _write_inline(self, op: WriteOp, scope: Scope) -> Any:
        handle = InlineHandle(self._new_request_waiter)
        try:
            result = op(self._shard, handle)
        except Exception as exc:
            if handle.materialized:
                handle.future.cancel()  # kept by the op before it failed; nobody will await it
            if not isinstance(exc, ApiError):
                self._guarded(partial(self._isolate, scope, exc))
            raise
        if not isinstance(result, Result):
            fut = handle.future
            self._start_slices(result, handle, scope)
            return fut
        if result.records or result.response is None or not self._settled():
            # An answer waits for its own records, or (Kafka's empty-records branch) for
            # the writes pending before it, so no client sees state that is not durable.
            fut = handle.future     # made before the append, so a failure there reaches it
            self._guarded(lambda: self._apply(result, handle, scope))
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                return fut.result()     # durable already (written inline)
            return fut
        if result.replies or result.after_commit is not None:
            # Settled, so nothing is pending: these are released right away, as the queue would.
            self._guarded(lambda: self._apply(result, None, scope))
        return result.response

    def _check_serving(self) -> None:
        if self._closing:
            reason = self._closing_reason
            raise type(reason)(*reason.args)     # a new one each time: a raise grows its traceback
        if self.state is PartitionState.ACTIVE:
            return
        if self.state is PartitionState.LOADING:
            raise PartitionLoading(f"partition {self.partition} is loading")
        raise PartitionNotActive(f"partition {self.partition} is {self.state.value}")

    def _new_waiter(self, future_type: type[EagerFuture] = EagerFuture) -> EagerFuture:
        # Eager, so that the request path can answer in the call that releases it.
        fut = future_type(self._loop)
        self._waiters.add(fut)
        fut.add_done_callback(self._waiters.discard)
        return fut

    def _enqueue(self, event: _Event) -> None:
        self._queue.put_nowait(event)

    def _new_request_waiter(self) -> EagerFuture:
        return self._new_waiter(RequestFuture)

    def _enqueue_read(self, op: Callable[[Any], Any], future_type: type[EagerFuture] = EagerFuture) -> EagerFuture:
        fut = self._new_waiter(future_type)
        self._enqueue(_Event(lambda: self._run_read(op, fut), fut))
        return fut

    def _on_timer_expired(self, timer: LoopTimer, entry: TimerEntry) -> None:
        if timer is not self._timer or self.state is not PartitionState.ACTIVE or self._closing:
            return
        self._enqueue(_Event(lambda: self._run_timer(timer, entry)))

    # ---- the consumer task -----------------------------------------------------------

    async def _consume(self) -> None:
        if await self._acquire():
            await self._load()
        self._loaded.set()
        while True:
            event = await self._queue.get()
            if self._sliced is not None:
                await asyncio.wait([self._sliced])
                if event is not _RELOAD and self.state is not PartitionState.ACTIVE:
                    continue    # the sliced op failed the partition: this event's waiter was answered
            if event is _RELOAD:
                await self._recover_and_reload()
                continue
            self._guarded(event.run)

    def _guarded(self, step: Callable[[], None]) -> None:
        # An op's own errors go to its waiter; an error escaping a step is a runtime bug
        # that may have left the shard half-updated, so the partition reloads.
        try:
            step()
        except Exception as exc:
            log.exception("partition %d: runtime step failed", self.partition)
            self._fail(exc)

    def _run_write(self, op: WriteOp, handle: FutureReplyHandle,
                   scope: Scope) -> None:
        try:
            result = op(self._shard, handle)
        except Exception as exc:
            self._op_failed(handle, scope, exc)
            return
        if not isinstance(result, Result):
            self._start_slices(result, handle, scope)
            return
        self._apply(result, handle, scope)

    def _run_read(self, op: Callable[[Any], Any], fut: asyncio.Future) -> None:
        if fut.done():
            return      # the client went away before its turn
        try:
            value = op(self._shard)
        except Exception as exc:
            fut.set_exception(exc)
            return
        self._park_or_release(Parked(self._last_written, [(fut, value)], None))

    def _run_timer(self, timer: LoopTimer, entry: TimerEntry) -> None:
        op = timer.claim(entry) if timer is self._timer else None
        if op is None:
            return      # rescheduled or cancelled after it expired
        self.stats.timer_ops += 1
        try:
            result = op()
        except Exception as exc:
            self._isolate(entry.key, exc)
            return
        self._apply(result, None, entry.key)

    def _apply(self, result: Result, handle: FutureReplyHandle | InlineHandle | None, scope: Scope) -> None:
        completions: list[tuple[asyncio.Future, Any]] = []
        if handle is not None and result.response is not None:
            completions.append((handle.future, result.response))
        completions.extend((reply.handle.future, reply.response) for reply in result.replies)
        if result.records or result.transaction is not None:
            try:
                log_records = self._serde.serialize_all(result.records)
            except Exception as exc:
                self._unwritable(result, handle, scope, exc)
                return
            if not self._append(result, log_records):
                return
        self._park_or_release(Parked(self._last_written, completions, result.after_commit, scope))

    def _unwritable(self, result: Result, handle: FutureReplyHandle | InlineHandle | None, scope: Scope,
                    exc: Exception) -> None:
        """A Result whose records cannot be serialized: nothing of it is written."""
        if scope is _ISOLATING:
            # Even the reset of a failed op cannot be written: its answers still go out,
            # and the shard keeps the reset it already made in memory.
            log.error("partition %d: a group reset could not be written: %r", self.partition, exc)
            self._park_or_release(Parked(self._last_written, [
                (reply.handle.future, reply.response) for reply in result.replies], None, None))
            return
        if handle is not None and not handle.future.done():
            handle.future.set_exception(exc)
        aborted = ApiError(ErrorCode.UNKNOWN_MEMBER_ID, "the group was reset")
        for reply in result.replies:
            if not reply.handle.future.done():
                reply.handle.future.set_exception(aborted)
        self._isolate(scope, exc)

    def _op_failed(self, handle: FutureReplyHandle | InlineHandle, scope: Scope, exc: Exception) -> None:
        """An op raised before anything of it was replayed: its request gets the error; a
        refusal (ApiError) leaves the group as it was, anything else may not have."""
        if not handle.future.done():
            handle.future.set_exception(exc)
        if not isinstance(exc, ApiError):
            self._isolate(scope, exc)

    def _isolate(self, scope: Scope, exc: Exception) -> None:
        """An operation on `scope` failed: let the shard put the scope right, partition serving."""
        log.error("partition %d: an operation on %r failed; answering it with an error and "
                  "isolating its scope", self.partition, scope, exc_info=exc)
        self.stats.op_failures += 1
        metrics.operation_failed()
        try:
            assert self._shard is not None, "only an active partition runs operations"
            recovery = self._shard.isolate(scope)
        except Exception as isolate_exc:
            log.exception("partition %d: could not isolate the failure on %r", self.partition, scope)
            self._fail(isolate_exc)
            return
        self._apply(recovery, None, _ISOLATING)

    def _append(self, result: Result, log_records: list[LogRecord]) -> bool:
        error = self._store.partition_error(self.partition)
        if error is not None:
            self._fail(error)
            return False
        # The store's end, not a count of our own: a replicated store leaves its
        # transaction markers' offsets out (coordinator/replicated/store.py).
        base = self._store.end_offset(self.partition)
        try:
            # The op already changed soft state for these records: if they cannot be
            # replayed, only a reload gives back a consistent shard.
            shard = self._shard
            assert shard is not None, "only an active partition appends"
            txn = result.transaction
            if txn is None:
                if result.replay:
                    for i, record in enumerate(result.records):
                        shard.replay(base + i, record)
                append = self._store.append(self.partition, log_records, self._clock())
            else:
                if txn.marker is None:
                    for i, record in enumerate(result.records):
                        shard.replay_transactional(base + i, txn.producer_id, record)
                else:
                    shard.replay_end_transaction(txn.producer_id, txn.marker)
                append = self._store.append(self.partition, log_records, self._clock(), TxnBatch(*txn))
        except Exception as exc:
            self._fail(exc)
            return False
        # A marker is one control record, which the store writes.
        return self._appended(append, base, max(len(log_records), 1))

    def _appended(self, append: Append, base: int, count: int) -> bool:
        """Account for an append of `count` records from `base`; False if the partition failed."""
        expected = base + count - 1
        if append.last_offset != expected:
            # Replay used offsets the log did not give: state and log disagree.
            self._fail(RuntimeError(f"store assigned offsets up to {append.last_offset}, expected {expected}"))
            return False
        self.stats.batches_appended += 1
        self.stats.records_appended += count
        self._last_written = append.last_offset
        if append.durable.done():
            # Written inline (no fsync owed): durable now, so the caller parks nothing and
            # an inline op answers in this very call, with no scheduling round.
            self._on_durable(self._epoch, append.last_offset, append.durable)
            return self.state is PartitionState.ACTIVE     # not if that write failed
        epoch = self._epoch
        # Released in the callback that hears of the fsync, not a loop turn later.
        append.durable.when_done(lambda fut: self._on_durable(epoch, append.last_offset, fut))
        return True

    def _park_or_release(self, parked: Parked) -> None:
        if parked.offset > self._last_durable:
            self._parked.append(parked)
            if self._answer_timeout_s is not None:
                due = self._loop.time() + self._answer_timeout_s
                self._due.append((due, parked))
                if self._due_timer is None:
                    self._due_timer = self._loop.call_at(due, self._answer_overdue)
        else:
            self._release(parked)

    def _answer_overdue(self) -> None:
        """Answer `WriteTimedOut` to the client requests whose answers have waited on
        durability for the answer timeout; their entries stay parked (an `after_commit`
        still runs once the write is durable, and a late answer is dropped)."""
        self._due_timer = None
        due, now = self._due, self._loop.time()
        while due and (due[0][1].offset <= self._last_durable or due[0][0] <= now):
            _, parked = due.popleft()
            if parked.offset <= self._last_durable:
                continue        # released meanwhile
            for fut, _ in parked.completions:
                if type(fut) is RequestFuture and not fut.done():
                    fut.set_exception(WriteTimedOut(
                        f"partition {self.partition}: the write is not durable after {self._answer_timeout_s:g} s"))
        if due:
            self._due_timer = self._loop.call_at(due[0][0], self._answer_overdue)

    def _on_durable(self, epoch: int, offset: int, fut: asyncio.Future) -> None:
        exc = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        if epoch != self._epoch:
            return
        if exc is not None:
            self._fail(exc)
            return
        self._last_durable = max(self._last_durable, offset)
        while self._parked and self._parked[0].offset <= self._last_durable:
            self._guarded(lambda: self._release(self._parked.popleft()))

    def _release(self, parked: Parked) -> None:
        for fut, value in parked.completions:
            if not fut.done():
                if isinstance(value, BaseException):
                    fut.set_exception(value)    # a request answered by a fault's isolation
                else:
                    fut.set_result(value)
        if parked.after_commit is None:
            return
        if self._sliced is not None:
            # The executor is a sliced op's until it ends.
            self._deferred.append((parked.after_commit, parked.scope))
            return
        self._after_commit(parked.after_commit, parked.scope)

    def _after_commit(self, after_commit: Callable[[], Result], scope: Scope) -> None:
        try:
            result = after_commit()
        except Exception as exc:
            self._isolate(scope, exc)
            return
        self._apply(result, None, scope)

    # ---- sliced ops ------------------------------------------------------------------

    def _start_slices(self, slices: Slices, handle: FutureReplyHandle | InlineHandle, scope: Scope) -> None:
        # The epoch now, not when the task first runs: the partition may fail in between.
        self._sliced = self._loop.create_task(self._run_slices(slices, handle, scope, self._epoch),
                                              name=f"partition-{self.partition}-sliced-op")

    async def _run_slices(self, slices: Slices, handle: FutureReplyHandle | InlineHandle, scope: Scope,
                          epoch: int) -> None:
        try:
            await self._write_slices(slices, handle, scope, epoch)
        except Exception as exc:
            # Not the op's own failure (that is isolated): replay or the store failed.
            log.error("partition %d: a sliced write failed: %r", self.partition, exc)
            self._fail(exc)
        finally:
            self._sliced = None
        deferred, self._deferred = self._deferred, []
        for after_commit, deferred_scope in deferred:
            self._guarded(partial(self._after_commit, after_commit, deferred_scope))

    async def _write_slices(self, slices: Slices, handle: FutureReplyHandle | InlineHandle, scope: Scope,
                            epoch: int) -> None:
        """`_apply` of a sliced op, a slice at a time (see "Sliced ops" above). Each step
        first checks that the partition has not failed since the op ran (its waiters, this
        op's among them, were then answered)."""
        if epoch != self._epoch:
            slices.close()
            return
        serialize_all = self._serde.serialize_all
        records: list = []
        log_records: list[LogRecord] = []
        try:
            while True:
                try:
                    records += next(slices)
                except StopIteration as end:
                    result: Result = end.value
                    break
                log_records += serialize_all(records[len(log_records):])
                await asyncio.sleep(0)
                if epoch != self._epoch:
                    slices.close()
                    return
            records += result.records
            log_records += serialize_all(result.records)
        except Exception as exc:
            # The op, or the serialization of its records, failed: nothing of it was replayed.
            self._op_failed(handle, scope, exc)
            return
        completions = [] if result.response is None else [(handle.future, result.response)]
        completions.extend((reply.handle.future, reply.response) for reply in result.replies)
        if records:
            error = self._store.partition_error(self.partition)
            if error is not None:
                self._fail(error)
                return
            # Prepared first: its base is where the store will put the batch.
            prepared = await self._store.prepare(self.partition, log_records, self._clock())
            if epoch != self._epoch:
                return
            base = prepared.base_offset
            if result.replay:
                shard = self._shard
                assert shard is not None, "the epoch has not moved, so the shard is the op's"
                for start in range(0, len(records), REPLAY_SLICE):
                    if start:
                        await asyncio.sleep(0)
                        if epoch != self._epoch:
                            return
                    for offset in range(start, min(start + REPLAY_SLICE, len(records))):
                        shard.replay(base + offset, records[offset])
            if not self._appended(self._store.append_prepared(prepared), base, len(records)):
                return
        self._park_or_release(Parked(self._last_written, completions, result.after_commit, scope))

    # ---- loading, failure, recovery --------------------------------------------------

    async def _acquire(self) -> bool:
        try:
            await self._store.acquire(self.partition)
        except Exception as exc:
            log.error("partition %d: cannot take it: %s", self.partition, exc)
            self._transition(PartitionState.FAILED)
            return False
        return True

    async def _load(self) -> None:
        timer = LoopTimer(self._loop, self._on_timer_expired)
        shard = self._shard_factory(self.partition, timer)
        started = time.monotonic()
        try:
            summary = await load_partition(self._store, self.partition, shard, self._serde)
            shard.on_loaded()
        except Exception as exc:
            timer.cancel_all()
            if isinstance(exc, LoadError | StorageError):
                log.error("partition %d: load failed: %s", self.partition, exc)
            else:
                log.exception("partition %d: load failed", self.partition)
            self._transition(PartitionState.FAILED)
            return
        self._shard, self._timer = shard, timer
        self._last_written = self._last_durable = summary.end_offset - 1
        elapsed_ms = (time.monotonic() - started) * 1000
        self.stats.loads += 1
        self.stats.records_loaded += summary.records
        self.stats.last_load_ms = elapsed_ms
        metrics.partition_loaded(elapsed_ms / 1000, summary.records)
        self._transition(PartitionState.ACTIVE)
        log.debug("partition %d loaded %d records (%d skipped) in %.1f ms, end offset %d",
                  self.partition, summary.records, summary.skipped, elapsed_ms, summary.end_offset)

    def fail(self, exc: BaseException) -> None:
        """From outside the write path (the store found damage): as a failed append."""
        self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.state is not PartitionState.ACTIVE:
            return
        log.error("partition %d failed, reloading from the durable log: %r", self.partition, exc)
        self.stats.failures += 1
        metrics.partition_failed()
        self._stop_serving(PartitionNotActive(f"partition {self.partition} failed: {exc!r}"))
        self._transition(PartitionState.FAILED)
        self._queue.put_nowait(_RELOAD)

    def _stop_serving(self, exc: Exception) -> None:
        """Answer every waiter with `exc`, drop queued events, timers and the shard."""
        self._epoch += 1
        if self._timer is not None:
            self._timer.cancel_all()
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is not _RELOAD and event.future is not None and not event.future.done():
                event.future.set_exception(exc)
        self._parked.clear()
        self._deferred.clear()
        self._due.clear()
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_exception(exc)
        shard, self._shard, self._timer = self._shard, None, None
        if shard is not None:
            try:
                shard.on_unloaded()
            except Exception:
                log.exception("partition %d: on_unloaded failed", self.partition)

    async def _recover_and_reload(self) -> None:
        self._transition(PartitionState.LOADING)
        try:
            end_offset = await self._store.recover(self.partition)
        except Exception:
            log.exception("partition %d: recovery failed; it stays failed", self.partition)
            self._transition(PartitionState.FAILED)
            return
        log.info("partition %d recovered to end offset %d, reloading", self.partition, end_offset)
        await self._load()

    def _transition(self, target: PartitionState) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalPartitionTransition(f"partition {self.partition}: {self.state.name} -> {target.name}")
        log.debug("partition %d: %s -> %s", self.partition, self.state.name, target.name)
        self.state = target
