"""Deletes the offsets of topics the upstream deleted, in every group.

Kafka's coordinator hears of a deleted topic from the controller's metadata and writes,
on each of its partitions, a tombstone for every offset of the topic
(`GroupCoordinatorService.onMetadataUpdate`, `OffsetMetadataManager.onTopicsDeleted`).
Without it, a topic recreated under the same name would be consumed from the old topic's
offsets. kgc learns the same from its reads of the upstream's topics
(`UpstreamCluster.on_topics_deleted`) and writes the tombstones
(`GroupShard.delete_offsets_of_topics`) on every partition this instance serves.

kgc hears of a deletion once. A partition still loading is waited for (bounded); one not
served here is skipped, as Kafka's write on a partition it does not coordinate fails: the
instance that owns it saw the same deletion. What a partition moving between instances
misses stays, and `kgc audit --upstream` reports it (`offset_of_deleted_topic`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from coordinator import metrics
from coordinator.runtime.api import PartitionLoading, PartitionNotActive, RuntimeClosed

log = logging.getLogger(__name__)

LOAD_WAIT_S = 60.0
LOAD_POLL_S = 0.2


class Writer(Protocol):
    num_partitions: int

    async def write(self, partition: int, op: Any) -> Any: ...


class DeletedTopics:
    def __init__(self, runtime: Writer, *, load_wait_s: float = LOAD_WAIT_S):
        self._runtime = runtime
        self._load_wait_s = load_wait_s
        self._tasks: set[asyncio.Task] = set()

    def on_deleted(self, deleted: Mapping[str, uuid.UUID]) -> None:
        """The upstream's callback: the deletion runs beside the refresh that found it."""
        task = asyncio.get_running_loop().create_task(self.delete(dict(deleted)), name="offsets-of-deleted-topics")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def delete(self, deleted: Mapping[str, uuid.UUID]) -> int:
        """Writes the tombstones on every partition served here; how many offsets went."""
        counts = await asyncio.gather(*(self._delete_on(p, deleted) for p in range(self._runtime.num_partitions)))
        total = sum(counts)
        metrics.offsets_deleted_with_topics(total)
        log.info("deleted topics %s: %d offsets deleted", sorted(deleted), total)
        return total

    async def _delete_on(self, partition: int, deleted: Mapping[str, uuid.UUID]) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._load_wait_s
        while True:
            try:
                return await self._runtime.write(
                    partition, lambda shard, handle: shard.delete_offsets_of_topics(deleted))
            except PartitionLoading:
                if loop.time() >= deadline:
                    log.warning("partition %d still loading after %g s: offsets of deleted topics %s stay",
                                partition, self._load_wait_s, sorted(deleted))
                    return 0
                await asyncio.sleep(LOAD_POLL_S)
            except (PartitionNotActive, RuntimeClosed):
                return 0

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
