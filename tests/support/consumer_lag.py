"""A kafka-python consumer group whose lag a test knows, through kgc: records produced one
per batch (a flush after each), so that the same checks hold in front of Tansu, whose
ListOffsets "latest" is the base offset of the last batch + 1 (tests/support/tansu.py); a
consumer that reads everything (its position is then the true log end); and a commit past
the log end."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.support.admin import create_topic, new_name

PER_PARTITION = (6, 4, 9)
READ_TIMEOUT_S = 30


def produce_one_per_batch(bootstrap: str, topic: str, counts) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, n in enumerate(counts):
        for i in range(n):
            producer.produce(topic, value=b"%d" % i, partition=partition)
            assert producer.flush(10) == 0


def joined_consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=200)
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(consumer.assignment()) < len(PER_PARTITION):
        assert time.monotonic() < deadline, "consumer never got its partitions"
        consumer.poll(timeout_ms=100, max_records=1)
    return consumer


def read_everything(consumer: KafkaConsumer, topic: str) -> dict[int, int]:
    """Polls until nothing new comes for a while; returns the consumer's position per partition."""
    quiet_since = time.monotonic()
    deadline = quiet_since + READ_TIMEOUT_S
    while time.monotonic() - quiet_since < 1.0:
        assert time.monotonic() < deadline
        if consumer.poll(timeout_ms=100):
            quiet_since = time.monotonic()
    return {p: consumer.position(TopicPartition(topic, p)) for p in range(len(PER_PARTITION))}


def commit_past_the_end(bootstrap: str) -> tuple[str, str]:
    """A topic holding five records, and a group that committed 8 on it: past the log end, as
    after the topic was deleted and recreated under the group (or in front of Tansu, whose log
    end of one batch of five records is 1)."""
    topic = create_topic(bootstrap, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200})
    for i in range(5):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(10) == 0
    group = new_name("batched")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(8, "", -1)})
    finally:
        consumer.close()
    return topic, group
