"""Transactional offsets in the group partition, over a real file store: pending until the
transaction's marker, UNSTABLE for require_stable readers, dropped on abort, applied on
commit unless a later plain commit replaced them, and the same after a reload from disk
(Kafka's OffsetMetadataManager; the markers come from coordinator/txn's tail)."""

from __future__ import annotations

import asyncio

from kafka.protocol.producer import TxnOffsetCommitRequest

from coordinator.common.result import MARKER_ABORT, MARKER_COMMIT
from coordinator.group.config import GroupConfig
from coordinator.group.context import RequestContext
from coordinator.group.shard import group_shard_factory
from coordinator.partitioning import partition_for
from coordinator.runtime.runtime import CoordinatorRuntime
from protocol.errors import ErrorCode
from storage.file_store import FileLogStore
from tests.support.builders import commit_request

CONFIG = GroupConfig(initial_rebalance_delay_ms=0)
GROUP = "eos-group"
P = partition_for(GROUP)
PID, EPOCH = 4000, 3


def txn_commit(offset: int, version: int = 3, generation: int = -1, member: str = "") -> TxnOffsetCommitRequest:
    cls = TxnOffsetCommitRequest[version]
    topic = cls.TxnOffsetCommitRequestTopic
    return cls(transactional_id="tx", group_id=GROUP, producer_id=PID, producer_epoch=EPOCH,
               generation_id=generation, member_id=member, group_instance_id=None, topics=[
                   topic(name="in", partitions=[topic.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                       committed_metadata="")])])


class Partition:
    def __init__(self, directory):
        self.directory = directory

    async def __aenter__(self):
        loop = asyncio.get_running_loop()
        self.store = FileLogStore(self.directory, num_partitions=CONFIG.num_partitions, fsync="never")
        await self.store.open()
        shards = group_shard_factory(CONFIG, lambda: int(loop.time() * 1000), lambda c: f"{c}-1")
        self.runtime = CoordinatorRuntime(self.store, CONFIG.num_partitions, clock=lambda: 0, shard_factory=shards)
        await self.runtime.start()
        await self.runtime.wait_loaded()
        return self

    async def __aexit__(self, *exc):
        await self.runtime.close()
        await self.store.close()

    async def stage(self, offset: int, source: int, **kw) -> list[int]:
        response = await self.runtime.write(P, lambda shard, h: shard.txn_commit_offsets(
            RequestContext(kw.get("version", 3), "c", "/h"), txn_commit(offset, **kw), source))
        return [p.error_code for t in response.topics for p in t.partitions]

    async def marker(self, marker: int, at: int) -> bool:
        return await self.runtime.write(P, lambda shard, h: shard.end_transaction(PID, EPOCH + 1, marker, at))

    async def plain_commit(self, offset: int) -> None:
        await self.runtime.write(P, lambda shard, h: shard.commit_offsets(
            RequestContext(8, "c", "/h"), commit_request(8, group_id=GROUP, offsets=(("in", 0, offset, None),))))

    async def fetch(self, stable: bool) -> tuple[int, int]:
        group = await self.runtime.read(P, lambda shard: shard.fetch_offsets(
            RequestContext(8, "c", "/h"), GROUP, [("in", [0])], stable))
        part = group.topics[0].partitions[0]
        return part.offset, int(part.error)

    async def tail_start(self) -> int | None:
        return await self.runtime.read(P, lambda shard: shard.txn_tail_start())


async def test_pending_offsets_are_unseen_until_commit_then_applied(tmp_path):
    async with Partition(tmp_path) as part:
        assert await part.stage(7, source=100) == [ErrorCode.NONE]
        # staged: plain readers see nothing, require_stable readers are told to wait
        assert await part.fetch(stable=False) == (-1, 0)
        assert await part.fetch(stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        # a marker older than the participant record ended an earlier transaction: no effect
        assert await part.marker(MARKER_COMMIT, at=99) is False
        assert await part.fetch(stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert await part.marker(MARKER_COMMIT, at=101) is True
        assert await part.fetch(stable=True) == (7, 0)


async def test_abort_drops_and_a_later_plain_commit_wins_over_an_earlier_transaction(tmp_path):
    async with Partition(tmp_path) as part:
        await part.plain_commit(3)
        await part.stage(9, source=10)
        assert await part.marker(MARKER_ABORT, at=11)
        assert await part.fetch(stable=True) == (3, 0)
        await part.stage(12, source=20)
        await part.plain_commit(5)      # written after the staged offset: the log order wins
        assert await part.marker(MARKER_COMMIT, at=21)
        assert await part.fetch(stable=True) == (5, 0)


async def test_a_reload_keeps_undecided_offsets_pending_and_says_where_to_tail_from(tmp_path):
    async with Partition(tmp_path) as part:
        await part.plain_commit(2)
        await part.stage(6, source=40)
        await part.stage(8, source=45)      # a second TxnOffsetCommit in the same transaction
    # a restart (the log read back from disk, transactional batches and all)
    async with Partition(tmp_path) as part:
        assert await part.fetch(stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert await part.fetch(stable=False) == (2, 0)
        assert await part.tail_start() == 40
        assert await part.marker(MARKER_COMMIT, at=50)
        assert await part.tail_start() is None
    async with Partition(tmp_path) as part:
        # the marker in kgc's log decided it for good
        assert await part.fetch(stable=True) == (8, 0)


async def test_a_member_of_another_generation_is_refused_and_nothing_is_staged(tmp_path):
    async with Partition(tmp_path) as part:
        await part.plain_commit(1)      # makes a simple (memberless) group
        assert await part.stage(4, source=1, generation=3, member="ghost") == [ErrorCode.UNKNOWN_MEMBER_ID]
        assert await part.fetch(stable=True) == (1, 0)
        assert await part.tail_start() is None
