"""A simple group's offsets (a consumer that assigns itself partitions: no member id, no
generation) on a topic of PARTITIONS partitions: committed through kafka-python, fetched
with a raw OffsetFetch v7."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.structs import OffsetAndMetadata

from coordinator.probe import request_response

# One topic size for the settled members and these offsets: tests check both on one topic.
from tests.support.settled_members import PARTITIONS


def offset_fetch(port: int, group: str, topic: str) -> tuple[int, dict[int, int]]:
    request = OffsetFetchRequest[7](group_id=group, topics=[OffsetFetchRequest[7].OffsetFetchRequestTopic(
        name=topic, partition_indexes=list(range(PARTITIONS)))], require_stable=False)
    response = request_response(("127.0.0.1", port), request, OffsetFetchResponse, timeout_s=30)
    return response.error_code, {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


def simple_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """What a consumer that assigns itself partitions commits (no member id, no generation),
    through kafka-python, which finds the group's coordinator first (on a new Kafka cluster,
    that creates `__consumer_offsets`)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in offsets])
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()
