"""The replicated store on the suite's real Kafka broker: what it writes is what a new
owner reads back, at the topic's own offsets; a second owner fences the first, and commits
again what the first acknowledged in the transaction it left open; other producers'
aborted transactions are not read; a topic kgc cannot use is refused with the reason."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream_topic import TopicRefused
from coordinator.replicated.state_topic import StateTopic
from coordinator.replicated.store import TRANSACTION_MS, FencedError, ReplicatedLogStore
from coordinator.settings import host_ports
from storage.api import LogRecord, StorageError

PARTITIONS = 50
NOW_MS = int(time.time() * 1000)


def at(ms: int) -> int:
    """A record timestamp `ms` after the module loaded. Near the present, as kgc's own are: a
    batch timestamped in 1970 would make the transaction marker the broker writes (stamped
    now) roll the segment, and Kafka's cleaner could then compact what a test reads back."""
    return NOW_MS + ms


def new_topic() -> str:
    return f"state-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def opened(kafka, topic: str, write_timeout_ms: int = 10_000, transaction_ms: int = TRANSACTION_MS):
    cluster = UpstreamCluster(host_ports(kafka.bootstrap))
    cluster.start()
    await cluster.wait_reachable()
    store = ReplicatedLogStore(StateTopic(cluster, topic, PARTITIONS, replication_factor=1, min_insync_replicas=1),
                               transactional_id_prefix=topic, write_timeout_ms=write_timeout_ms,
                               transaction_ms=transaction_ms)
    try:
        await store.open()
        await asyncio.gather(*(store.acquire(p) for p in range(PARTITIONS)))
        yield store
    finally:
        await store.close()
        await cluster.close()


def records(store, partition):
    return [(r.offset, r.key, r.value, r.headers) for b in store.read(partition) for r in b.records]


async def test_what_one_owner_wrote_a_new_owner_reads_back_at_the_topics_offsets(kafka):
    topic = new_topic()
    async with opened(kafka, topic) as first:
        a = first.append(7, [LogRecord(b"k1", b"v1", (("kgc-owner", b"a"),)), LogRecord(b"k2", None)], at(1_000))
        b = first.append(7, [LogRecord(b"k1", b"v2")], at(2_000))
        await a.durable
        await b.durable
        c = first.append(7, [LogRecord(b"k3", b"v3")], at(3_000))
        await c.durable
        written = records(first, 7)
    end = first.end_offset(7)      # closed: its transaction ended
    # One open transaction holds all three, at consecutive offsets; the end's marker
    # follows them, where the second owner writes on.
    assert [o for o, *_ in written] == [0, 1, 2, 3] and c.last_offset == 3 and end == 5
    async with opened(kafka, topic) as second:
        assert records(second, 7) == written
        assert second.end_offset(7) == end
        assert records(second, 8) == []
        # And it writes on at the offset the topic gives.
        d = second.append(7, [LogRecord(b"k4", b"v4")], at(4_000))
        assert await d.durable == end
    async with opened(kafka, topic) as third:
        assert records(third, 7)[-1] == (end, b"k4", b"v4", ())


async def test_a_prepared_batch_and_a_barrier_become_durable_in_order(kafka):
    async with opened(kafka, new_topic()) as store:
        first = store.append(3, [LogRecord(b"a", b"1")], at(1_000))
        prepared = await store.prepare(3, [LogRecord(f"k{i}".encode(), b"x") for i in range(5_000)], at(1_000))
        big = store.append_prepared(prepared)
        barrier = store.append(3, [], at(1_000))
        assert prepared.base_offset == store.end_offset(3) - 5_000
        assert await first.durable == first.last_offset
        assert await big.durable == big.last_offset
        await barrier.durable
        assert len(records(store, 3)) == 5_001


async def test_a_second_owner_fences_the_first_whose_partition_stays_failed(kafka):
    topic = new_topic()
    async with opened(kafka, topic, write_timeout_ms=5_000) as first:
        kept = first.append(1, [LogRecord(b"kept", b"1")], at(1_000))
        await kept.durable
        async with opened(kafka, topic) as second:
            refused = first.append(1, [LogRecord(b"lost", b"2")], at(2_000))
            with pytest.raises(StorageError):
                await refused.durable
            assert first.partition_error(1) is not None
            with pytest.raises(FencedError):
                await first.recover(1)
            # The first owner's acknowledged write, in the transaction the second's claim
            # aborted, is read and committed again after it.
            assert [k for _, k, _, _ in records(second, 1)] == [b"kept", b"kept"]
            # Other partitions of the first owner were fenced too, at their next write.
            other = first.append(2, [LogRecord(b"late", b"3")], at(3_000))
            with pytest.raises(StorageError):
                await other.durable


def committed_view(kafka, topic: str, partition: int) -> dict[bytes, bytes | None]:
    """The partition as a read_committed consumer sees it, latest value per key: what
    Kafka's cleaner keeps, which drops aborted transactions' batches."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"view-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, low)])
        view: dict[bytes, bytes | None] = {}
        deadline = time.monotonic() + 30
        position = low
        while position < high and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                continue
            view[message.key()] = message.value()
            position = message.offset() + 1
        return view
    finally:
        consumer.close()


async def test_what_an_owner_acknowledged_survives_its_unfinished_transaction(kafka):
    topic = new_topic()
    # A transaction that stays open: the first owner is taken over in the middle of it.
    async with opened(kafka, topic, write_timeout_ms=5_000, transaction_ms=600_000) as first:
        await first.append(4, [LogRecord(b"old", b"1")], at(1_000)).durable
        await first.append(4, [LogRecord(b"acked", b"2"), LogRecord(b"old", None)], at(2_000)).durable
        assert b"acked" not in committed_view(kafka, topic, 4)      # its transaction is still open
        async with opened(kafka, topic) as second:
            assert [(k, v) for _, k, v, _ in records(second, 4)] == [
                (b"old", b"1"), (b"acked", b"2"), (b"old", None),     # the first owner's, aborted
                (b"acked", b"2"), (b"old", None)]                     # committed again
            assert committed_view(kafka, topic, 4) == {b"acked": b"2", b"old": None}
            # What the second writes goes after them, in its own transaction.
            written = second.append(4, [LogRecord(b"new", b"3")], at(3_000))
            assert await written.durable == 7
    async with opened(kafka, topic) as third:
        assert [(k, v) for _, k, v, _ in records(third, 4)][-1] == (b"new", b"3")
        assert committed_view(kafka, topic, 4) == {b"acked": b"2", b"old": None, b"new": b"3"}


async def test_records_of_an_aborted_transaction_are_not_read(kafka):
    topic = new_topic()
    async with opened(kafka, topic) as store:
        await store.append(5, [LogRecord(b"before", b"1")], at(1_000)).durable
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{topic}-intruder"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"aborted", value=b"x", partition=5)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"committed", value=b"y", partition=5)
    producer.commit_transaction(30)
    async with opened(kafka, topic) as store:
        assert [k for _, k, _, _ in records(store, 5)] == [b"before", b"committed"]


async def test_a_topic_with_another_partition_count_or_a_delete_policy_is_refused(kafka):
    few = kafka.create_topic(new_topic(), 3)
    with pytest.raises(TopicRefused, match="has 3 partitions upstream; kgc needs 50"):
        async with opened(kafka, few):
            pass
    deleting = kafka.create_topic(new_topic(), PARTITIONS)
    with pytest.raises(TopicRefused, match="cleanup.policy=delete"):
        async with opened(kafka, deleting):
            pass


async def test_an_aborted_batch_of_a_producer_that_committed_before_is_kept(kafka):
    """The transactional id's producer id changes when its epochs run out: the earlier id's
    last, aborted, transaction is an earlier owner's, and read as such."""
    topic = new_topic()
    async with opened(kafka, topic):
        pass
    earlier = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{topic}-earlier"})
    earlier.init_transactions(30)
    earlier.begin_transaction()
    earlier.produce(topic, key=b"committed", value=b"1", partition=6)
    earlier.commit_transaction(30)
    earlier.begin_transaction()
    earlier.produce(topic, key=b"unfinished", value=b"2", partition=6)
    earlier.flush(30)
    earlier.abort_transaction(30)
    async with opened(kafka, topic) as store:
        assert [k for _, k, _, _ in records(store, 6)] == [b"committed", b"unfinished", b"unfinished"]
    assert committed_view(kafka, topic, 6) == {b"committed": b"1", b"unfinished": b"2"}
