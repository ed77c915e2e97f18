"""Group commit: one writer per partition between `append` and the disk.

`submit` returns an encoded batch's `durable` future. Two ways to the disk:

- Inline: when the policy owes no fsync with this write (`never`, or `interval` before
  its time), nothing is queued or in the thread, and the batch rolls no segment, `submit`
  writes it from the event loop and returns its future already resolved. A write to the
  page cache takes microseconds; a round trip through a thread costs a context switch
  each way, which a client with one commit in flight waits for.
- Otherwise the batch queues, and a `_start` scheduled for the end of this loop
  iteration (so that requests read together share one write and one fsync) takes every
  queued batch: one `write` call (more when a segment rolls), then the fsync if the
  policy says so. Usually in the writer thread, whose answer runs on the loop as one
  callback that marks the log durable, resolves every future the write covered in
  offset order, and hands the thread whatever queued meanwhile. Under load one fsync
  releases many batches. The futures are `EagerFuture`s: the runtime, registered with
  `when_done`, releases the answers inside that same callback.
- On the loop, fsync included: when this writer is the only one of its store with
  anything to write this iteration, no writer's thread is busy, the group is small, no
  roll is due nor an extension of the preallocated segment, and the store's last fsync
  took under `LOOP_FSYNC_MAX_S`. Then the
  process has nothing else for the disk and a client is waiting for exactly this
  fsync; the thread's hand-off and the loop's wake-up after it cost a few tens of
  microseconds each, a sizeable share of a fast disk's fsync. The price: requests that
  arrive during that fsync are read after it (at most one fast fsync later; commits
  among them would have waited for it anyway). A slow fsync sends the store's next
  ones to the threads until one is fast again, so a disk that stalls holds the loop
  once, not for every commit.

A write or fsync that raises fails the partition: the batches of that write, every
queued batch and every later submit fail with `StorageError` until the owner recovers
the partition (which truncates the log back to the durable mark) and calls `reset`.

An optional `CommitObserver` hears of each group commit (batches, bytes, write and
fsync time) and of each batch's append-to-durable time: the coordinator's metrics,
passed in so that storage imports nothing from the coordinator.

Each writer owns one thread for its disk work (writes and fsyncs, one at a time): a
`SimpleQueue` hand-off costs far less than `asyncio.to_thread`'s executor round trip
(docs/benchmarks/notes.md, "Writer thread and load replay"). `close` waits for the thread's work,
fsyncs what was only written, then stops and joins it; a writer dropped without `close`
stops its thread when collected.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from storage.api import StorageError
from storage.eager_future import EagerFuture
from storage.fsync_policy import FsyncPolicy
from storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

# The loop-thread fsync (module docstring): the most the store's last fsync may have
# taken, and the most bytes one such group may write.
LOOP_FSYNC_MAX_S = 0.001
LOOP_FSYNC_MAX_BYTES = 64 * 2**10


class CommitObserver(Protocol):
    def group_committed(self, batches: int, size_bytes: int, write_s: float, fsync_s: float | None) -> None: ...

    def fsynced(self, fsync_s: float) -> None: ...

    def durable(self, append_s: float) -> None: ...


class Unobserved:
    def group_committed(self, batches: int, size_bytes: int, write_s: float, fsync_s: float | None) -> None:
        pass

    def fsynced(self, fsync_s: float) -> None:
        pass

    def durable(self, append_s: float) -> None:
        pass


class DiskActivity:
    """What one store's writers (all on one loop) share to decide whether an fsync may
    run on the loop thread."""

    __slots__ = ("in_threads", "starting", "last_fsync_s")

    def __init__(self) -> None:
        self.in_threads = 0          # jobs handed to writer threads, not yet answered
        self.starting = 0            # `_start`s scheduled for the end of this iteration
        self.last_fsync_s = 0.0      # the store's latest fsync, from any writer

    def loop_may_fsync(self) -> bool:
        return self.in_threads == 0 and self.starting == 0 and self.last_fsync_s < LOOP_FSYNC_MAX_S


@dataclass(slots=True)
class _Queued:
    base_offset: int
    data: bytes                      # empty: a barrier, durable with everything before it
    last_offset: int
    next_offset: int
    durable: EagerFuture
    submitted_s: float               # perf_counter at submit


class GroupCommitWriter:
    def __init__(self, partition: int, partition_log: PartitionLog, policy: FsyncPolicy,
                 observer: CommitObserver | None = None, disk: DiskActivity | None = None):
        self.partition = partition
        self._disk = disk or DiskActivity()
        self._log = partition_log
        self._policy = policy
        self._observer = observer or Unobserved()
        self._loop = asyncio.get_running_loop()
        self._queue: list[_Queued] = []
        self._busy = False               # the thread has a write or an fsync of ours
        self._start_pending = False      # a `_start` is scheduled
        self._closing = False
        self._idle = asyncio.Event()     # set while not busy with nothing queued
        self._idle.set()
        self._unsynced = False           # written since the last fsync
        self._last_fsync = self._loop.time()
        self._deferred: asyncio.TimerHandle | None = None
        self.failure: StorageError | None = None
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=_serve, args=(self._jobs,), name=f"group-commit-{partition}")
        self._thread.start()
        weakref.finalize(self, self._jobs.put, None)

    def submit(self, base_offset: int, data: bytes, last_offset: int, next_offset: int) -> EagerFuture:
        durable = EagerFuture(self._loop)
        if self.failure is not None:
            durable.set_exception(self.failure)
            return durable
        queued = _Queued(base_offset, data, last_offset, next_offset, durable, time.perf_counter())
        if not self._busy and not self._queue and self._writes_inline(len(data)):
            self._write_inline(queued)
            return durable
        self._queue.append(queued)
        self._idle.clear()
        if not self._busy and not self._start_pending:
            # Not started right here: requests read in the same loop iteration (several
            # clients' commits) join this write and share its fsync.
            self._start_pending = True
            self._disk.starting += 1
            self._loop.call_soon(self._scheduled_start)
        return durable

    def reset(self) -> None:
        self.failure = None
        self._unsynced = False

    async def close(self) -> None:
        self._closing = True
        if self._deferred is not None:
            self._deferred.cancel()
            self._deferred = None
        try:
            await self._idle.wait()
            if self._unsynced and self.failure is None:
                try:
                    await self._fsync()
                except Exception as e:
                    self._fail(e, "fsync at close")
        finally:
            self._jobs.put(None)
            self._thread.join()

    # -- the inline write: no fsync due, nothing ahead of it ------------------------------

    def _writes_inline(self, size: int) -> bool:
        """Whether a write can go out from the event loop: it owes no fsync (a write to the
        page cache takes microseconds, a hand-off to the thread and back far longer) and
        does not roll a segment (a roll fsyncs)."""
        ms_since_fsync = (self._loop.time() - self._last_fsync) * 1000
        return not self._policy.fsync_with_write(ms_since_fsync) and self._log.fits(size)

    def _write_inline(self, queued: _Queued) -> None:
        started = time.perf_counter()
        try:
            segment, size = self._log.write_group([(queued.base_offset, queued.data)])
        except Exception as e:
            _settle(queued.durable, self._fail(e, "write"))
            return
        self._unsynced = True
        self._written([queued], segment, size, time.perf_counter() - started, None)
        self._schedule_deferred_fsync()

    # -- the thread: writes that fsync or roll, and deferred fsyncs -----------------------

    def _scheduled_start(self) -> None:
        self._start_pending = False
        self._disk.starting -= 1
        self._start()

    def _start(self) -> None:
        if self._busy or not self._queue or self.failure is not None:
            return
        group, self._queue = self._queue, []
        fsync = self._policy.fsync_with_write((self._loop.time() - self._last_fsync) * 1000)
        batches = [(q.base_offset, q.data) for q in group]
        if fsync and self._disk.loop_may_fsync() and self._small_and_no_roll(group):
            try:
                outcome = self._write_group(batches, fsync)
            except Exception as e:
                self._group_done(group, fsync, None, e)
            else:
                self._group_done(group, fsync, outcome, None)
            return
        self._busy = True
        self._to_thread(self._write_group, (batches, fsync), partial(self._group_done, group, fsync))

    def _small_and_no_roll(self, group: list[_Queued]) -> bool:
        size = sum(len(q.data) for q in group)
        # `fits` judges one batch; a group no larger than a segment that fits rolls nowhere.
        # A write that extends the preallocated tail writes and fsyncs a chunk of zeros
        # too: milliseconds, not for the loop.
        return (size <= LOOP_FSYNC_MAX_BYTES and size <= self._log.segment_bytes and self._log.fits(size)
                and not self._log.extends_preallocation(size))

    def _to_thread(self, fn: Any, args: tuple, on_done: Any) -> None:
        self._disk.in_threads += 1
        self._jobs.put((self._loop, fn, args, partial(self._thread_done, on_done)))

    def _thread_done(self, on_done: Any, outcome: Any, error: BaseException | None) -> None:
        self._disk.in_threads -= 1
        on_done(outcome, error)

    def _write_group(self, batches: list[tuple[int, bytes]], fsync: bool):
        """In the writer thread: the write, then the fsync, timed apart."""
        started = time.perf_counter()
        segment, size = self._log.write_group(batches)
        written = time.perf_counter()
        if not fsync:
            return segment, size, written - started, None
        self._log.fsync()
        return segment, size, written - started, time.perf_counter() - written

    def _group_done(self, group: list[_Queued], fsync: bool, outcome: Any, error: BaseException | None) -> None:
        """On the loop, straight from the thread's answer: release the group, then hand the
        thread whatever queued meanwhile, in the same callback."""
        self._busy = False
        if error is not None:
            failure = self._fail(error, "write")
            for queued in group:
                _settle(queued.durable, failure)
        else:
            segment, size, write_s, fsync_s = outcome
            if fsync:
                self._last_fsync = self._loop.time()
                self._disk.last_fsync_s = fsync_s
            self._unsynced = not fsync
            self._written(group, segment, size, write_s, fsync_s)
        self._next()

    def _written(self, group: list[_Queued], segment: Any, size: int, write_s: float, fsync_s: float | None) -> None:
        self._log.mark_durable(segment, size, group[-1].next_offset)
        now = time.perf_counter()
        # The answers first (each settle writes its response, see EagerFuture), the
        # metrics after: a client waits for the former only.
        for queued in group:
            _settle(queued.durable, queued.last_offset)
        self._observer.group_committed(len(group), sum(len(q.data) for q in group), write_s, fsync_s)
        for queued in group:
            self._observer.durable(now - queued.submitted_s)

    def _next(self) -> None:
        if self._queue and self.failure is None:
            self._start()
        elif not self._busy:
            self._idle.set()
            self._schedule_deferred_fsync()

    def _schedule_deferred_fsync(self) -> None:
        """Under `interval`, fsync unsynced data when its time comes (if no write that
        carries its own fsync comes first)."""
        if self._deferred is not None or self._closing or not self._unsynced or self.failure is not None:
            return
        delay_ms = self._policy.deferred_fsync_in_ms((self._loop.time() - self._last_fsync) * 1000)
        if delay_ms is not None:
            self._deferred = self._loop.call_later(delay_ms / 1000, self._deferred_fsync)

    def _deferred_fsync(self) -> None:
        self._deferred = None
        if not self._unsynced or self.failure is not None or self._closing:
            return
        if self._busy or self._queue:
            # The write under way or queued decides; `_next` schedules again after it.
            return
        self._busy = True
        self._idle.clear()
        started = time.perf_counter()
        self._to_thread(self._log.fsync, (), partial(self._deferred_done, started))

    def _deferred_done(self, started: float, _outcome: Any, error: BaseException | None) -> None:
        self._busy = False
        if error is not None:
            self._fail(error, "deferred fsync")
        else:
            fsync_s = time.perf_counter() - started
            self._observer.fsynced(fsync_s)
            self._disk.last_fsync_s = fsync_s
            self._last_fsync = self._loop.time()
            self._unsynced = False
        self._next()

    async def _fsync(self) -> None:
        started = time.perf_counter()
        done = self._loop.create_future()
        self._to_thread(self._log.fsync, (), partial(_answer, done))
        await done
        self._observer.fsynced(time.perf_counter() - started)

    def _fail(self, cause: BaseException, what: str) -> StorageError:
        failure = self.failure = StorageError(f"partition {self.partition}: {what} failed: {cause}")
        failure.__cause__ = cause
        log.error("partition %d failed: %s failed: %s", self.partition, what, cause)
        for queued in self._queue:
            _settle(queued.durable, failure)
        self._queue = []
        if not self._busy:
            self._idle.set()
        return failure


def _settle(future: EagerFuture, outcome: int | StorageError) -> None:
    # A waiter that gave up (cancelled its future) must not stop the others.
    if future.done():
        return
    if isinstance(outcome, StorageError):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _serve(jobs: queue.SimpleQueue) -> None:
    """The writer thread: run each job in turn until `None`, handing its outcome to the
    job's callback on the job's loop."""
    while (job := jobs.get()) is not None:
        loop, fn, args, on_done = job
        try:
            outcome = fn(*args)
        except BaseException as e:   # every job must be answered, or its writer waits forever
            loop.call_soon_threadsafe(on_done, None, e)
        else:
            loop.call_soon_threadsafe(on_done, outcome, None)


def _answer(done: asyncio.Future, outcome: Any, error: BaseException | None) -> None:
    # Cancelled when the close waiting on it was cancelled.
    if done.cancelled():
        return
    if error is None:
        done.set_result(outcome)
    else:
        done.set_exception(error)
