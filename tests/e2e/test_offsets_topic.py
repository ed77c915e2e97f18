"""Reading `__consumer_offsets` through kgc: real consumers see kgc's own log.

kgc (with a data dir) runs in front of Kafka; a real group consumes and commits through
it. Then kafka-python and confluent-kafka consumers, with no group, assign() all 50
partitions of `__consumer_offsets` from the beginning and read to the end. Every record
they get, decoded with `coordinator.records`, must be one `kgc inspect` shows at the same
partition and offset, and they must get all of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.admin.topics import DeleteRecordsRequest, DeleteRecordsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from coordinator import records
from coordinator.probe import request_response
from protocol.errors import ErrorCode
from storage.api import LogRecord
from storage.format import encode_batch
from tests.support.admin import create_topic, new_name, produce_sequenced
from tests.support.clients import commit_through_rejoin
from tests.support.kgc import KGC_GROUP_FLAGS, free_port, kgc_process, wait_listening

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "__consumer_offsets"
PARTITIONS = 50
READ_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def kgc_with_log(kafka, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("offsets-topic") / "data"
    broker_port = free_port()
    with kgc_process("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                     "--data-dir", str(data_dir), *KGC_GROUP_FLAGS) as proc:
        wait_listening(broker_port)
        yield proc, data_dir


def commit_through_a_group(bootstrap: str) -> str:
    """A real group consumes and commits (several commits, a GroupMetadata record)."""
    topic = create_topic(bootstrap, 2)
    produce_sequenced(bootstrap, topic, 2, 5)
    group = new_name("reader")
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=200)
    try:
        seen = 0
        deadline = time.monotonic() + READ_TIMEOUT_S
        while seen < 10 and time.monotonic() < deadline:
            for _ in consumer:
                seen += 1
                commit_through_rejoin(consumer)
        assert seen == 10
    finally:
        consumer.close()
    return group


def inspected(data_dir) -> dict[tuple[int, int], tuple]:
    out = subprocess.run([sys.executable, "-m", "coordinator", "inspect", str(data_dir), "--json"],
                         capture_output=True, check=True, timeout=60).stdout
    found = {}
    for part in json.loads(out)["partitions"]:
        for segment in part["segments"]:
            for batch in segment["batches"]:
                for rec in batch["records"]:
                    found[(part["partition"], rec["offset"])] = _from_inspect(rec["key"], rec["value"])
    return found


def _from_inspect(key: dict, value: dict | None) -> tuple:
    if key["type"] == "OffsetCommitKey":
        v = None if value is None else (value["offset"], value["metadata"], value["commit_timestamp_ms"])
        return ("offset", key["group"], key["topic"], key["partition"], v)
    v = None if value is None else (value["generation"], value["protocol"], value["leader"],
                                    tuple(m["member_id"] for m in value["members"]))
    return ("group", key["group"], v)


def decoded(key: bytes, value: bytes | None) -> tuple:
    k, v = records.deserialize(key, value)
    if isinstance(k, records.OffsetCommitKey):
        return ("offset", k.group, k.topic, k.partition,
                None if v is None else (v.offset, v.metadata, v.commit_timestamp_ms))
    return ("group", k.group, None if v is None else (v.generation, v.protocol, v.leader,
                                                       tuple(m.member_id for m in v.members)))


def read_with_kafka_python(bootstrap: str) -> dict[tuple[int, int], tuple]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
        tps = [KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        got = {}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, {tp.partition: (consumer.position(tp), ends[tp]) for tp in tps}
            for tp, batch in consumer.poll(timeout_ms=200).items():
                for m in batch:
                    got[(tp.partition, m.offset)] = decoded(m.key, m.value)
        return got
    finally:
        consumer.close()


def read_with_confluent(bootstrap: str) -> dict[tuple[int, int], tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-no-commits",
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got = {}
        last = {p: -1 for p in range(PARTITIONS)}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(last[p] + 1 < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, {p: (last[p], ends[p]) for p in range(PARTITIONS)}
            for m in consumer.consume(num_messages=500, timeout=0.2):
                assert m.error() is None, m.error()
                got[(m.partition(), m.offset())] = decoded(m.key(), m.value())
                last[m.partition()] = m.offset()
        return got
    finally:
        consumer.close()


def test_consumers_reading_consumer_offsets_through_kgc_get_what_kgc_inspect_shows(kgc_with_log):
    kgc, data_dir = kgc_with_log
    group = commit_through_a_group(kgc.bootstrap)
    expected = inspected(data_dir)
    assert any(rec[1] == group for rec in expected.values())
    assert read_with_kafka_python(kgc.bootstrap) == expected
    assert read_with_confluent(kgc.bootstrap) == expected


def test_produce_and_delete_records_on_consumer_offsets_are_refused_as_kafka_refuses_an_internal_topic(
        kgc_with_log):
    # Raw requests: kafka-python's producer will not even pick a partition of an internal topic.
    kgc, _ = kgc_with_log
    address = ("127.0.0.1", kgc.port)
    batch = encode_batch(0, [LogRecord(b"k", b"v")], 0)
    produced = request_response(address, ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(version=9, name=TOPIC, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(version=9, index=3, records=batch)])]),
        ProduceResponse)
    [[answer]] = [t.partition_responses for t in produced.responses]
    assert (answer.index, answer.error_code) == (3, ErrorCode.INVALID_TOPIC_EXCEPTION)
    deleted = request_response(address, DeleteRecordsRequest[2](timeout_ms=1000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(version=2, name=TOPIC, partitions=[
            DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(version=2, partition_index=0, offset=1)])]),
        DeleteRecordsResponse)
    assert [p.error_code for t in deleted.topics for p in t.partitions] == [ErrorCode.INVALID_TOPIC_EXCEPTION]
    assert read_with_kafka_python(kgc.bootstrap) == inspected(kgc_with_log[1])


def test_deleting_consumer_offsets_is_refused(kgc_with_log):
    # DeleteTopics goes to the controller, an upstream broker's listener. (CreatePartitions
    # is refused the same way, tests/gateway/test_offsets_topic.py.)
    kgc, data_dir = kgc_with_log
    client = KafkaAdminClient(bootstrap_servers=kgc.bootstrap, request_timeout_ms=10_000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            client.delete_topics([TOPIC], timeout_ms=5_000)
    finally:
        client.close()
    assert read_with_kafka_python(kgc.bootstrap) == inspected(data_dir)
