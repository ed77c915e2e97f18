"""The coordinator runtime: one `PartitionRuntime` per `__consumer_offsets` partition.

`start()` begins loading every partition at once and returns; requests for a partition
still loading are refused with `PartitionLoading` until it is ACTIVE (`all_loaded` feeds
/readyz). `close()` stops accepting, drains each partition and answers whatever is still
parked with `RuntimeClosed`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Any

from coordinator.common.result import Result
from coordinator.runtime.api import PartitionNotActive, RuntimeClosed
from coordinator.runtime.loader import KafkaRecordSerde, RecordSerde
from coordinator.runtime.partition import (
    FutureReplyHandle,
    PartitionRuntime,
    PartitionState,
    PartitionStats,
    ShardFactory,
)
from storage.api import LogStore

log = logging.getLogger(__name__)


class CoordinatorRuntime:
    def __init__(self, store: LogStore, num_partitions: int, *, clock: Callable[[], int],
                 shard_factory: ShardFactory, serde: RecordSerde | None = None):
        """`shard_factory(partition, timer)` makes a partition's shard (the app's are
        `GroupShard`s: `coordinator.group.shard.group_shard_factory`)."""
        if store.num_partitions != num_partitions:
            raise ValueError(f"store has {store.num_partitions} partitions, config {num_partitions}")
        self.num_partitions = num_partitions
        self._closed = False
        self._partitions = [
            PartitionRuntime(p, store, shard_factory, serde or KafkaRecordSerde(), clock)
            for p in range(self.num_partitions)
        ]

    async def start(self) -> None:
        for partition in self._partitions:
            partition.start()

    async def wait_loaded(self) -> None:
        """Returns when every partition's first load has ended (ACTIVE or FAILED)."""
        await asyncio.gather(*(p.wait_loaded() for p in self._partitions))

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*(p.close() for p in self._partitions))

    async def write(self, partition: int, op: Callable[[Any, FutureReplyHandle], Result],
                    scope: Hashable = None) -> Any:
        return await self._partition(partition).write(op, scope)

    async def read(self, partition: int, op: Callable[[Any], Any]) -> Any:
        return await self._partition(partition).read(op)

    def submit_write(self, partition: int, op: Callable[[Any, FutureReplyHandle], Result],
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
        return all(p.state is PartitionState.ACTIVE for p in self._partitions)

    def stats(self) -> list[PartitionStats]:
        return [p.stats for p in self._partitions]

    def _partition(self, partition: int) -> PartitionRuntime:
        if self._closed:
            raise RuntimeClosed("coordinator is shutting down")
        if not 0 <= partition < self.num_partitions:
            raise PartitionNotActive(f"partition {partition} is not owned here")
        return self._partitions[partition]
