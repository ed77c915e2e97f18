"""A commit may only name topics and partitions the upstream Kafka has, as Kafka's own
`KafkaApis` checks it: each partition of a topic Kafka does not have, and each partition
past a topic's count, is answered UNKNOWN_TOPIC_OR_PARTITION and not stored; the rest of
the commit is. The same commits sent to Kafka directly get the same answers."""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, TopicPartition
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.probe import read_exactly, request_response
from protocol.txn_offset_commit_messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from tests.support.admin import admin, create_topic, new_name
from tests.support.clients import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_VERSION = 7
# kgc reads the upstream's topics every 5 s; a deletion takes one read and one write.
DELETION_SEEN_S = 30


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})


def commit(bootstrap: str, group: str, *offsets: tuple[str, int, int]) -> dict[tuple[str, int], int]:
    """Each partition's answer (0 when committed, else the error code), by confluent-kafka."""
    client = consumer(bootstrap, group)
    try:
        try:
            answered = client.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=False)
        except Exception as exc:        # every partition refused: the error names the first
            err = exc.args[0]
            assert isinstance(err, KafkaError), exc
            return {(t, p): err.code() for t, p, _ in offsets}
        return {(tp.topic, tp.partition): tp.error.code() if tp.error else 0 for tp in answered}
    finally:
        client.close()


def committed(bootstrap: str, group: str, *partitions: tuple[str, int]) -> dict[tuple[str, int], int]:
    client = consumer(bootstrap, group)
    try:
        answer = client.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        return {(tp.topic, tp.partition): tp.offset for tp in answer}
    finally:
        client.close()


def test_a_commit_to_a_topic_kafka_does_not_have_is_refused_as_kafka_refuses_it(kgc, kafka):
    missing = new_name("never-created")
    for bootstrap in (kgc.bootstrap, kafka.bootstrap):
        group = new_name("missing-topic")
        assert commit(bootstrap, group, (missing, 0, 5), (missing, 1, 6)) == {
            (missing, 0): KafkaError.UNKNOWN_TOPIC_OR_PART, (missing, 1): KafkaError.UNKNOWN_TOPIC_OR_PART}, bootstrap
        assert committed(bootstrap, group, (missing, 0)) == {(missing, 0): OFFSET_INVALID}, bootstrap


def test_partitions_past_a_topics_count_are_refused_and_the_rest_committed(kgc, kafka):
    topic = create_topic(kafka.bootstrap, 2)
    missing = new_name("never-created")
    for bootstrap in (kgc.bootstrap, kafka.bootstrap):
        group = new_name("missing-partition")
        answers = _raw_commit(bootstrap, group, [(topic, [0, 1, 7]), (missing, [0])], offset=9)
        assert answers == {(topic, 0): 0, (topic, 1): 0, (topic, 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
                           (missing, 0): KafkaError.UNKNOWN_TOPIC_OR_PART}, bootstrap
        assert committed(bootstrap, group, (topic, 0), (topic, 1)) == {(topic, 0): 9, (topic, 1): 9}, bootstrap


def test_a_transactional_commit_to_a_topic_kafka_does_not_have_is_refused_as_kafka_refuses_it(kgc, kafka):
    # Nothing is left to commit, so neither looks at the transaction: none is needed here.
    missing = new_name("never-created")
    for bootstrap in (kgc.bootstrap, kafka.bootstrap):
        group = new_name("missing-topic-txn")
        cls = TxnOffsetCommitRequest[3]
        topic_cls = cls.TxnOffsetCommitRequestTopic
        request = cls(transactional_id=new_name("txn"), group_id=group, producer_id=4242, producer_epoch=0,
                      generation_id=-1, member_id="", group_instance_id=None, topics=[topic_cls(name=missing, partitions=[
                          topic_cls.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=5,
                                                                    committed_leader_epoch=-1, committed_metadata="")
                          for p in (0, 1)])])
        response = request_response(_coordinator(bootstrap, group), request, TxnOffsetCommitResponse, timeout_s=30)
        assert {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions} == {
            (missing, 0): KafkaError.UNKNOWN_TOPIC_OR_PART, (missing, 1): KafkaError.UNKNOWN_TOPIC_OR_PART}, bootstrap


def test_a_topic_created_a_moment_ago_takes_commits_at_once(kgc):
    # Created at Kafka directly: kgc has not read it yet, and asks Kafka for it by name.
    group = new_name("new-topic")
    for _ in range(3):
        topic = create_topic(kgc.bootstrap, 3)
        assert commit(kgc.bootstrap, group, (topic, 2, 4)) == {(topic, 2): 0}
        assert committed(kgc.bootstrap, group, (topic, 2)) == {(topic, 2): 4}


def test_a_commit_after_its_topic_is_deleted_does_not_bring_its_offsets_back(kgc):
    topic = create_topic(kgc.bootstrap, 1)
    group = new_name("late-commit")
    assert commit(kgc.bootstrap, group, (topic, 0, 5)) == {(topic, 0): 0}
    deleter = admin(kgc.bootstrap)
    try:
        deleter.delete_topics([topic], timeout_ms=10_000)
    finally:
        deleter.close()
    wait_until(lambda: committed(kgc.bootstrap, group, (topic, 0))[(topic, 0)] == OFFSET_INVALID, DELETION_SEEN_S,
               lambda: f"offsets after the deletion: {committed(kgc.bootstrap, group, (topic, 0))}")
    # A member that has not noticed the deletion commits its position once more.
    assert commit(kgc.bootstrap, group, (topic, 0, 6)) == {(topic, 0): KafkaError.UNKNOWN_TOPIC_OR_PART}
    create_topic(kgc.bootstrap, 1, name=topic)
    assert committed(kgc.bootstrap, group, (topic, 0)) == {(topic, 0): OFFSET_INVALID}


def test_requests_behind_a_commit_whose_topic_is_asked_upstream_are_served_after_it(kgc):
    """Pipelined on one connection: a commit naming a topic kgc has not read (asked of Kafka
    first) and then one of the same partition of a known topic: the later offset stays."""
    known = create_topic(kgc.bootstrap, 1)
    assert commit(kgc.bootstrap, new_name("warm"), (known, 0, 1)) == {(known, 0): 0}    # kgc knows it now
    group = new_name("pipelined")
    for round_ in range(5):
        fresh = create_topic(kgc.bootstrap, 1)
        answers = _raw_pipelined(kgc.bootstrap, group, [[(fresh, [0]), (known, [0])], [(known, [0])]],
                                 offsets=[10 * round_ + 1, 10 * round_ + 2])
        assert answers == [{(fresh, 0): 0, (known, 0): 0}, {(known, 0): 0}]
        assert committed(kgc.bootstrap, group, (known, 0), (fresh, 0)) == {(known, 0): 10 * round_ + 2,
                                                                          (fresh, 0): 10 * round_ + 1}


def _raw_commit(bootstrap: str, group: str, topics, offset: int) -> dict[tuple[str, int], int]:
    (answers,) = _raw_pipelined(bootstrap, group, [topics], offsets=[offset])
    return answers


def _raw_pipelined(bootstrap: str, group: str, commits, offsets: list[int]) -> list[dict[tuple[str, int], int]]:
    """OffsetCommit v7 requests written back to back on one connection to the group's
    coordinator, as a simple consumer's; each one's answers, by partition."""
    cls = OffsetCommitRequest[_VERSION]
    topic_cls = cls.OffsetCommitRequestTopic
    partition_cls = topic_cls.OffsetCommitRequestPartition
    frames = []
    for i, (topics, offset) in enumerate(zip(commits, offsets, strict=True)):
        request = cls(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                      topics=[topic_cls(name=name, partitions=[
                          partition_cls(partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                                        committed_metadata="") for p in partitions]) for name, partitions in topics])
        request.with_header(correlation_id=i + 1, client_id="kgc-test")
        frames.append(request.encode(header=True, framed=True))
    with socket.create_connection(_coordinator(bootstrap, group), timeout=30) as sock:
        sock.sendall(b"".join(frames))
        answers = []
        for i in range(len(frames)):
            (size,) = struct.unpack(">i", read_exactly(sock, 4))
            response = OffsetCommitResponse.decode(read_exactly(sock, size), version=_VERSION, header=True)
            assert response.header.correlation_id == i + 1
            answers.append({(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions})
    return answers


def _coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    found = []

    def find() -> bool:
        response = request_response((host, int(port)), FindCoordinatorRequest[3](key=group, key_type=0),
                                    FindCoordinatorResponse, timeout_s=10)
        found[:] = [(response.host, response.port)] if response.error_code == 0 else []
        return bool(found)
    wait_until(find, 30, lambda: f"no coordinator for {group} at {bootstrap}")
    return found[0]
