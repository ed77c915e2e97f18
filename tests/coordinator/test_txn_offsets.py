"""Transactional offsets in the group partition, over a real file store: pending until the
transaction's marker, UNSTABLE for require_stable readers, dropped on abort, applied on
commit unless a later plain commit replaced them, and the same after a reload from disk
(Kafka's OffsetMetadataManager; the markers come from coordinator/txn's tail). Each test
runs on the replicated store too, over the suite's real Kafka, where a client's transaction
is written as kgc's own records (coordinator/replicated/client_txn.py) and a reload is a
new owner reading the state topic."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from coordinator.common.result import MARKER_ABORT, MARKER_COMMIT
from coordinator.gateway.cluster import UpstreamCluster
from coordinator.group.config import GroupConfig
from coordinator.group.context import RequestContext
from coordinator.group.shard import group_shard_factory
from coordinator.partitioning import partition_for
from coordinator.replicated.state_topic import StateTopic
from coordinator.replicated.store import ReplicatedLogStore
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.settings import host_ports
from protocol.errors import ErrorCode
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest
from storage.file_store import FileLogStore
from tests.support.builders import commit_request

CONFIG = GroupConfig(initial_rebalance_delay_ms=0)
GROUP = "eos-group"
P = partition_for(GROUP)
PID, EPOCH = 4000, 3


def txn_commit(offset: int, version: int = 3, generation: int = -1, member: str = "",
               topic_id: uuid.UUID | None = None) -> TxnOffsetCommitRequest:
    cls = TxnOffsetCommitRequest[version]
    topic = cls.TxnOffsetCommitRequestTopic
    # From v6 the wire names the topic by id; the edge (net/topic_ids.py) has named it by then.
    return cls(transactional_id="tx", group_id=GROUP, producer_id=PID, producer_epoch=EPOCH,
               generation_id=generation, member_id=member, group_instance_id=None, topics=[
                   topic(name="in", topic_id=topic_id, partitions=[topic.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                       committed_metadata="")])])


@pytest.fixture(params=["file", "replicated"])
def where(request, tmp_path):
    """Where the partition's log lives: a directory, or a state topic upstream."""
    if request.param == "file":
        return tmp_path
    return (request.getfixturevalue("kafka"), f"state-{uuid.uuid4().hex[:8]}")


class Partition:
    def __init__(self, where):
        self.where = where
        self.cluster: UpstreamCluster | None = None

    async def __aenter__(self):
        loop = asyncio.get_running_loop()
        if isinstance(self.where, tuple):
            kafka, topic = self.where
            self.cluster = UpstreamCluster(host_ports(kafka.bootstrap))
            self.cluster.start()
            await self.cluster.wait_reachable()
            self.store = ReplicatedLogStore(StateTopic(self.cluster, topic, CONFIG.num_partitions, replication_factor=1,
                                                       min_insync_replicas=1), transactional_id_prefix=topic)
        else:
            self.store = FileLogStore(self.where, num_partitions=CONFIG.num_partitions, fsync="never")
        await self.store.open()
        shards = group_shard_factory(CONFIG, lambda: int(loop.time() * 1000), lambda c: f"{c}-1")
        self.runtime = CoordinatorRuntime(self.store, CONFIG.num_partitions, clock=lambda: 0, shard_factory=shards,
                                          owned={P})
        await self.runtime.start()
        await self.runtime.wait_loaded()
        return self

    async def __aexit__(self, *exc):
        await self.runtime.close()
        await self.store.close()
        if self.cluster is not None:
            await self.cluster.close()

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


async def test_pending_offsets_are_unseen_until_commit_then_applied(where):
    async with Partition(where) as part:
        assert await part.stage(7, source=100) == [ErrorCode.NONE]
        # staged: plain readers see nothing, require_stable readers are told to wait
        assert await part.fetch(stable=False) == (-1, 0)
        assert await part.fetch(stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        # a marker older than the participant record ended an earlier transaction: no effect
        assert await part.marker(MARKER_COMMIT, at=99) is False
        assert await part.fetch(stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert await part.marker(MARKER_COMMIT, at=101) is True
        assert await part.fetch(stable=True) == (7, 0)


async def test_abort_drops_and_a_later_plain_commit_wins_over_an_earlier_transaction(where):
    async with Partition(where) as part:
        await part.plain_commit(3)
        await part.stage(9, source=10)
        assert await part.marker(MARKER_ABORT, at=11)
        assert await part.fetch(stable=True) == (3, 0)
        await part.stage(12, source=20)
        await part.plain_commit(5)      # written after the staged offset: the log order wins
        assert await part.marker(MARKER_COMMIT, at=21)
        assert await part.fetch(stable=True) == (5, 0)


async def test_a_reload_keeps_undecided_offsets_pending_and_says_where_to_tail_from(where):
    async with Partition(where) as part:
        await part.plain_commit(2)
        await part.stage(6, source=40)
        await part.stage(8, source=45)      # a second TxnOffsetCommit in the same transaction
    # a restart (the log read back from disk, transactional batches and all)
    async with Partition(where) as part:
        assert await part.fetch(stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert await part.fetch(stable=False) == (2, 0)
        assert await part.tail_start() == 40
        assert await part.marker(MARKER_COMMIT, at=50)
        assert await part.tail_start() is None
    async with Partition(where) as part:
        # the marker in kgc's log decided it for good
        assert await part.fetch(stable=True) == (8, 0)


async def test_a_member_of_another_generation_is_refused_and_nothing_is_staged(where):
    async with Partition(where) as part:
        await part.plain_commit(1)      # makes a simple (memberless) group
        assert await part.stage(4, source=1, generation=3, member="ghost") == [ErrorCode.UNKNOWN_MEMBER_ID]
        assert await part.fetch(stable=True) == (1, 0)
        assert await part.tail_start() is None


def compacted_copy(kafka, topic: str, partition: int, into: str) -> int:
    """What Kafka's cleaner leaves of `topic`'s partition once it has run and the tombstones
    are past `delete.retention.ms` (the last record of each key, none deleted), written in
    order into the same partition of `into`: the cleaner, made deterministic. Returns the
    records left."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        tp = TopicPartition(topic, partition, 0)
        consumer.assign([tp])
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        latest: dict[bytes, tuple[int, object]] = {}
        for _ in range(end):        # at most one record an offset; markers take offsets too
            message = consumer.poll(3)
            if message is None:
                break
            assert message.error() is None, message.error()
            latest[message.key()] = (message.offset(), message)
        assert latest and max(o for o, _ in latest.values()) >= end - 2, (end, latest.keys())
    finally:
        consumer.close()
    kept = sorted((o, m) for o, m in latest.values() if m.value() is not None)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for _, message in kept:
        producer.produce(into, key=message.key(), value=message.value(), headers=message.headers(),
                         partition=partition)
    assert producer.flush(10) == 0
    return len(kept)


async def test_what_kafkas_cleaner_leaves_of_the_state_topic_loads_to_the_same_offsets(kafka):
    # given a partition's transactional history on the replicated store: a commit, a later
    # transaction of the same producer and partition aborted, one a plain commit overtook,
    # one committed last, one still open (the same pending key each time: only the copies
    # keep what committed)
    topic = f"state-{uuid.uuid4().hex[:8]}"
    async with Partition((kafka, topic)) as part:
        await part.plain_commit(2)
        await part.stage(6, source=10)
        assert await part.marker(MARKER_COMMIT, at=11)
        await part.stage(9, source=20)
        assert await part.marker(MARKER_ABORT, at=21)
        await part.stage(12, source=30)
        await part.plain_commit(10)
        assert await part.marker(MARKER_COMMIT, at=31)
        await part.stage(14, source=35)
        assert await part.marker(MARKER_COMMIT, at=36)
        await part.stage(15, source=40)
        before = (await part.fetch(stable=False), await part.fetch(stable=True), await part.tail_start())
    assert before == ((14, 0), (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), 40)
    compacted = f"{topic}-compacted"
    async with Partition((kafka, compacted)):
        pass        # the topic, made as kgc makes it
    # when the cleaner has dropped every superseded record and tombstone
    kept = compacted_copy(kafka, topic, P, compacted)
    # then a new owner reading what is left sees the same offsets, and the open transaction
    async with Partition((kafka, compacted)) as part:
        assert (await part.fetch(stable=False), await part.fetch(stable=True), await part.tail_start()) == before
        assert await part.marker(MARKER_ABORT, at=41)
        assert await part.fetch(stable=True) == (14, 0)
    # (the last copy of the offset, and the open transaction's pending record)
    assert kept == 2


@pytest.mark.parametrize(("version", "expected"), [(5, ErrorCode.ILLEGAL_GENERATION), (6, ErrorCode.GROUP_ID_NOT_FOUND)])
async def test_a_generation_for_a_group_that_does_not_exist_is_named_from_v6(tmp_path, version, expected):
    # Kafka's validateTransactionalOffsetCommit: KIP-1319 gives v6 the error's own name
    async with Partition(tmp_path) as part:
        assert await part.stage(4, source=1, version=version, generation=2, member="m") == [expected]
        assert await part.tail_start() is None


async def test_a_v6_commit_keeps_the_topic_id_it_named_the_topic_by(tmp_path):
    # Kafka's commitTransactionalOffset: OffsetAndMetadata.fromRequest(topic.topicId(), ...),
    # written as OffsetCommitValue v4 with the id; before v6 the topic has no id.
    from coordinator.offline.state import replay_state

    topic_id = uuid.UUID("0e3a2c54-9f1b-4c7d-8a6e-5b4c3d2e1f00")
    async with Partition(tmp_path) as part:
        assert await part.stage(7, source=100, version=6, topic_id=topic_id) == [ErrorCode.NONE]
        assert await part.marker(MARKER_COMMIT, at=101) is True
        assert await part.fetch(stable=True) == (7, 0)
    committed = replay_state(tmp_path).offsets[GROUP, "in", 0]
    assert (committed.offset, committed.topic_id) == (7, topic_id)
