"""Group commit: one writer task per partition between `append` and the disk.

`submit` queues an encoded batch and returns its `durable` future. The writer task
takes every batch queued since its last write, writes them with one `write` call (more
when a segment rolls) in the writer's own thread, fsyncs there if the policy says so, and
back on the event loop resolves every future the write covered, in offset order. While a
write is in the thread, new batches queue up for the next one: under load one fsync
releases many batches.

A write or fsync that raises fails the partition: the batches of that write, every
queued batch and every later submit fail with `StorageError` until the owner recovers
the partition (which truncates the log back to the durable mark) and calls `reset`.

An optional `CommitObserver` hears of each group commit (batches, bytes, write and
fsync time) and of each batch's append-to-durable time: the coordinator's metrics,
passed in so that storage imports nothing from the coordinator.

Each writer owns one thread for its disk work (writes and fsyncs, one at a time): a
`SimpleQueue` hand-off costs far less than `asyncio.to_thread`'s executor round trip
(BENCHMARKS.md, "Writer thread and load replay"). `close` stops and joins it; a writer dropped
without `close` stops its thread when collected.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from storage.api import StorageError
from storage.fsync_policy import FsyncPolicy
from storage.partition_log import PartitionLog

log = logging.getLogger(__name__)


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


@dataclass(slots=True)
class _Queued:
    base_offset: int
    data: bytes                      # empty: a barrier, durable with everything before it
    last_offset: int
    next_offset: int
    durable: asyncio.Future[int]
    submitted_s: float               # perf_counter at submit


class GroupCommitWriter:
    def __init__(self, partition: int, partition_log: PartitionLog, policy: FsyncPolicy,
                 observer: CommitObserver | None = None):
        self.partition = partition
        self._log = partition_log
        self._policy = policy
        self._observer = observer or Unobserved()
        self._queue: list[_Queued] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._unsynced = False           # written since the last fsync
        self._last_fsync = asyncio.get_running_loop().time()
        self.failure: StorageError | None = None
        self._loop = asyncio.get_running_loop()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=_serve, args=(self._jobs,), name=f"group-commit-{partition}")
        self._thread.start()
        weakref.finalize(self, self._jobs.put, None)
        self._task = asyncio.create_task(self._run(), name=f"group-commit-{partition}")

    def submit(self, base_offset: int, data: bytes, last_offset: int, next_offset: int) -> asyncio.Future[int]:
        durable = asyncio.get_running_loop().create_future()
        if self.failure is not None:
            durable.set_exception(self.failure)
        else:
            self._queue.append(_Queued(base_offset, data, last_offset, next_offset, durable,
                                       time.perf_counter()))
            self._wake.set()
        return durable

    def reset(self) -> None:
        self.failure = None
        self._unsynced = False

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        try:
            await self._task
        finally:
            self._jobs.put(None)
            self._thread.join()

    def _in_thread(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        done = self._loop.create_future()
        self._jobs.put((self._loop, done, fn, args))
        return done

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                if self._closing:
                    break
                self._wake.clear()
                await self._idle(loop)
                continue
            group, self._queue = self._queue, []
            fsync = self._policy.fsync_with_write((loop.time() - self._last_fsync) * 1000)
            try:
                segment, size, write_s, fsync_s = await self._in_thread(
                    self._write_group, [(q.base_offset, q.data) for q in group], fsync)
            except Exception as e:
                self._fail(e, "write")
                for queued in group:
                    _settle(queued.durable, self.failure)
                continue
            if fsync:
                self._last_fsync = loop.time()
            self._unsynced = not fsync
            self._log.mark_durable(segment, size, group[-1].next_offset)
            self._observer.group_committed(len(group), sum(len(q.data) for q in group), write_s, fsync_s)
            now = time.perf_counter()
            for queued in group:
                self._observer.durable(now - queued.submitted_s)
                _settle(queued.durable, queued.last_offset)
            # Not kept alive while idle: after a burst, the last group's batch bytes would
            # stay allocated until the next write.
            del group
        await self._final_fsync()

    def _write_group(self, batches: list[tuple[int, bytes]], fsync: bool):
        """In the writer thread: the write, then the fsync, timed apart."""
        started = time.perf_counter()
        segment, size = self._log.write_group(batches)
        written = time.perf_counter()
        if not fsync:
            return segment, size, written - started, None
        self._log.fsync()
        return segment, size, written - started, time.perf_counter() - written

    async def _fsync(self) -> None:
        started = time.perf_counter()
        await self._in_thread(self._log.fsync)
        self._observer.fsynced(time.perf_counter() - started)

    async def _idle(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for work; under `interval`, fsync unsynced data when its time comes."""
        delay_ms = None
        if self._unsynced and self.failure is None:
            delay_ms = self._policy.deferred_fsync_in_ms((loop.time() - self._last_fsync) * 1000)
        if delay_ms is None:
            await self._wake.wait()
            return
        try:
            await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)
        except TimeoutError:
            try:
                await self._fsync()
            except Exception as e:
                self._fail(e, "deferred fsync")
                return
            self._last_fsync = loop.time()
            self._unsynced = False

    async def _final_fsync(self) -> None:
        if self._unsynced and self.failure is None:
            try:
                await self._fsync()
            except Exception as e:
                self._fail(e, "fsync at close")

    def _fail(self, cause: Exception, what: str) -> None:
        self.failure = StorageError(f"partition {self.partition}: {what} failed: {cause}")
        self.failure.__cause__ = cause
        log.error("partition %d failed: %s failed: %s", self.partition, what, cause)
        for queued in self._queue:
            _settle(queued.durable, self.failure)
        self._queue = []


def _settle(future: asyncio.Future[int], outcome: int | StorageError) -> None:
    # A waiter that gave up (cancelled its future) must not stop the others.
    if future.done():
        return
    if isinstance(outcome, StorageError):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _serve(jobs: queue.SimpleQueue) -> None:
    """The writer thread: run each job in turn until `None`, answering on the job's loop."""
    while (job := jobs.get()) is not None:
        loop, done, fn, args = job
        try:
            outcome = fn(*args)
        except BaseException as e:   # every job must be answered, or its writer waits forever
            loop.call_soon_threadsafe(_answer, done, None, e)
        else:
            loop.call_soon_threadsafe(_answer, done, outcome, None)


def _answer(done: asyncio.Future, outcome: Any, error: BaseException | None) -> None:
    # Cancelled when the writer task was cancelled mid-write.
    if done.cancelled():
        return
    if error is None:
        done.set_result(outcome)
    else:
        done.set_exception(error)
