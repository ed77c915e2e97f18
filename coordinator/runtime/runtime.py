"""The coordinator runtime: one `PartitionRuntime` per `__consumer_offsets` partition.

`start()` begins loading every partition this instance owns at once and returns; requests
for a partition still loading are refused with `PartitionLoading` until it is ACTIVE
(`all_loaded` feeds /readyz). `close()` stops accepting, drains each partition and answers
whatever is still parked with `RuntimeClosed`.

An instance that shares the partitions with others (the replicated store's ownership) owns
a set that changes: `acquire(p)` loads a partition (the store takes it first), `release(p)`
drains it, answers what is parked with `PartitionNotActive` (NOT_COORDINATOR: the client
looks for the new owner) and lets the store forget it. A partition not owned is refused
with `PartitionNotActive` too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable
from functools import partial
from typing import Any

from coordinator.runtime.api import PartitionNotActive, RuntimeClosed, WriteOp
from coordinator.runtime.loader import KafkaRecordSerde, RecordSerde
from coordinator.runtime.partition import PartitionRuntime, ShardFactory
from coordinator.runtime.partition_state import PartitionState
from coordinator.runtime.partition_stats import PartitionStats
from storage.api import LogStore

log = logging.getLogger(__name__)


class CoordinatorRuntime:
    def __init__(self, store: LogStore, num_partitions: int, *, clock: Callable[[], int],
                 shard_factory: ShardFactory, serde: RecordSerde | None = None,
                 owned: Iterable[int] | None = None, answer_timeout_s: float | None = None):
        """`shard_factory(partition, timer)` makes a partition's shard (the app's are
        `GroupShard`s: `coordinator.group.shard.group_shard_factory`); `owned`: the
        partitions to load at start (None: all); `answer_timeout_s`: how long a client's
        answer may wait on durability (None: however long; `partition.py`)."""
        if store.num_partitions != num_partitions:
            raise ValueError(f"store has {store.num_partitions} partitions, config {num_partitions}")
        self.num_partitions = num_partitions
        self._closed = False
        self._store = store
        self._new_partition = partial(PartitionRuntime, store=store, shard_factory=shard_factory,
                                      serde=serde or KafkaRecordSerde(), clock=clock,
                                      answer_timeout_s=answer_timeout_s)
        self._partitions = [self._new_partition(p) for p in range(self.num_partitions)]
        self.owned: set[int] = set(range(num_partitions) if owned is None else owned)
        # Several instances: whether this one's claim on `owned` still holds (its ownership
        # lease); None for a store that only this instance writes.
        self.serving: Callable[[], bool] | None = None

    async def start(self) -> None:
        for p in sorted(self.owned):
            self._partitions[p].start()

    async def wait_loaded(self, partitions: Iterable[int] | None = None) -> None:
        """Returns when the first load of every owned partition (or of `partitions`) has
        ended (ACTIVE or FAILED)."""
        await asyncio.gather(*(self._partitions[p].wait_loaded()
                               for p in (self.owned if partitions is None else partitions)))

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*(p.close() for p in self._partitions))

    def acquire(self, partition: int) -> None:
        """Start loading `partition` here (the store takes it first)."""
        if self._closed or partition in self.owned:
            return
        self.owned.add(partition)
        self._partitions[partition].start()

    async def release(self, partition: int, drain_timeout_s: float = 5.0) -> None:
        """Stop serving `partition` here, once what was asked of it is durable."""
        if partition not in self.owned:
            return
        self.owned.discard(partition)
        old = self._partitions[partition]
        self._partitions[partition] = self._new_partition(partition)
        await old.close(drain_timeout_s, PartitionNotActive(f"partition {partition} moved to another instance"))
        await self._store.release(partition)

    async def write(self, partition: int, op: WriteOp,
                    scope: Hashable = None) -> Any:
        return await self._partition(partition).write(op, scope)

    async def read(self, partition: int, op: Callable[[Any], Any]) -> Any:
        return await self._partition(partition).read(op)

    def submit_write(self, partition: int, op: WriteOp,
                     scope: Hashable = None) -> Any:
        """`write` without a coroutine: the response, or a future of it (see `PartitionRuntime`)."""
        return self._partition(partition).submit_write(op, scope)

    def submit_read(self, partition: int, op: Callable[[Any], Any]) -> Any:
        return self._partition(partition).submit_read(op)

    def partition_state(self, partition: int) -> PartitionState:
        return self._partitions[partition].state

    def fail_partition(self, partition: int, exc: BaseException) -> None:
        """Stop serving a partition whose store found damage; it reloads (and is refused)."""
        self._partitions[partition].fail(exc)

    @property
    def all_loaded(self) -> bool:
        return all(self._partitions[p].state is PartitionState.ACTIVE for p in self.owned)

    def stats(self) -> list[PartitionStats]:
        return [p.stats for p in self._partitions]

    def _partition(self, partition: int) -> PartitionRuntime:
        if self._closed:
            raise RuntimeClosed("coordinator is shutting down")
        if not 0 <= partition < self.num_partitions:
            raise PartitionNotActive(f"partition {partition} is not owned here")
        if self.serving is not None and not self.serving():
            raise PartitionNotActive("this instance's ownership lapsed: its partitions may have moved")
        return self._partitions[partition]
