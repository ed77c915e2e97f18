"""Runs the online cleaner: every `interval_ms`, one pass over the partitions.

Before cleaning a partition the pass checks its closed segments against their manifest
(`store.verify`); damage fails the partition in the runtime (`fail_partition`), which
then stays FAILED, naming the damage, until `kgc repair` accepts the loss.

A pass calls `store.clean(p)` for each partition, one at a time (Kafka runs one cleaner
thread too), skipping every partition the runtime does not report ACTIVE: a partition
that is loading may be in the middle of recovery, whose truncation must not race a
segment rewrite, and a failed one has nothing the cleaner should touch. (The store also
serializes `clean` and `recover` per partition; asking the runtime first keeps the
cleaner out of a reload's way instead of queueing behind it.)

`close()` stops the schedule promptly: it wakes the wait between passes and ends the
pass after the partition being cleaned. That partition is not abandoned mid-rewrite: a
clean runs in a worker thread that cancelling could not stop, and the store must not
close under it.

Each pass re-reads every closed segment of every active partition, so the interval is
the knob between cleaning latency and I/O; closed segments only appear when a segment
rolls (100 MiB by default), so minutes are a sensible interval for a large log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from coordinator import metrics
from coordinator.periodic import run_every
from coordinator.runtime.partition_state import PartitionState
from storage.api import StorageError

log = logging.getLogger(__name__)


class CleanableStore(Protocol):
    num_partitions: int

    async def clean(self, partition: int) -> Any:
        """Compact the partition's closed segments once; returns a report (FileLogStore's
        `CompactionStats`), which the schedule passes on after counting its bytes removed."""

    async def verify(self, partition: int) -> StorageError | None:
        """Check the closed segments against the manifest; the damage found, or None."""


class PartitionStates(Protocol):
    def partition_state(self, partition: int) -> PartitionState: ...

    def fail_partition(self, partition: int, exc: BaseException) -> None: ...


class CleanerSchedule:
    def __init__(self, store: CleanableStore, runtime: PartitionStates, interval_ms: int):
        if interval_ms <= 0:
            raise ValueError(f"cleaner interval must be positive, not {interval_ms} ms")
        self._store = store
        self._runtime = runtime
        self.interval_ms = interval_ms
        self._stopping = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.passes = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-cleaner")

    async def close(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def run_pass(self) -> dict[int, Any]:
        """Clean every ACTIVE partition once; the reports of those that were cleaned."""
        reports: dict[int, Any] = {}
        started = time.perf_counter()
        for partition in range(self._store.num_partitions):
            if self._stopping.is_set():
                break
            state = self._runtime.partition_state(partition)
            if state is not PartitionState.ACTIVE:
                log.debug("partition %d not cleaned: it is %s", partition, state.value)
                continue
            damage = await self._store.verify(partition)
            if damage is not None:
                # Closed segments changed under a running log: the partition stops serving
                # now, and its reload refuses it with the same damage until it is repaired.
                self._runtime.fail_partition(partition, damage)
                continue
            try:
                reports[partition] = await self._store.clean(partition)
            except (StorageError, OSError) as e:
                log.warning("partition %d: cleaning failed, retrying next pass: %s", partition, e)
        self.passes += 1
        metrics.cleaner_pass(time.perf_counter() - started,
                             sum(r.bytes_before - r.bytes_after for r in reports.values()))
        return reports

    async def _run(self) -> None:
        await run_every(self.interval_ms, self._stopping, self.run_pass, "cleaner pass")
