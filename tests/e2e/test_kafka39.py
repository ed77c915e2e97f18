"""kgc in front of Kafka 3.9 (the last 3.x line), a smaller set: classic groups of the Java client
and librdkafka, of kafka-python and aiokafka, of kafkajs and of sarama (IBM/sarama told the
cluster is 3.9.0), and KIP-848 consumer groups, which a 3.9 cluster does not offer on its own (its
consumer protocol is a preview, off unless enabled): kgc brings them."""

from __future__ import annotations

import dataclasses
import time

import pytest
from confluent_kafka import Consumer

from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    produce_sequenced,
    sequences_by_partition,
)
from tests.support.clients import (
    CONSUMER_PROTOCOL,
    JAVA_CONSUMER_PROTOCOL,
    Consumed,
    Member,
    MemberSettings,
    wait_until,
)
from tests.support.kafka import KafkaCluster
from tests.support.kafka_dist import KAFKA_OLD_VERSION
from tests.support.kafkajs import node, run_group_story  # noqa: F401 (node: a fixture, Node and kafkajs or a skip)
from tests.support.kgc import KGC_GROUP_FLAGS, kgc_in_front_of
from tests.support.sarama import run_members, sarama_1_61  # noqa: F401 (a fixture: IBM/sarama's programs or a skip)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 4
RECORDS = 10
TIMEOUT_S = 60
CONTROL_S = 10    # what a KIP-848 member gets from Kafka 3.9 alone in this long: nothing


@pytest.fixture(scope="module")
def kafka39(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("kafka39"), version=KAFKA_OLD_VERSION) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kgc39(kafka39, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("kgc39") / "kgc.log"
    with kgc_in_front_of(kafka39, *KGC_GROUP_FLAGS, log_path=str(log_path)) as proc:
        yield proc


@pytest.mark.parametrize("libraries", [("java", "confluent-kafka"), ("kafka-python", "aiokafka"),
                                       (JAVA_CONSUMER_PROTOCOL, CONSUMER_PROTOCOL)],
                         ids=["classic", "classic-python", "consumer-protocol"])
def test_a_mixed_group_shares_the_topic_and_commits(kgc39, libraries):
    bootstrap = kgc39.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("k39")
    members = [Member(lib, MemberSettings(bootstrap, group, topic, f"{group}-{i}")).start()
               for i, lib in enumerate(libraries)]
    try:
        wait_until(lambda: sorted(p for m in members for p in m.assignment) == list(range(PARTITIONS))
                   and all(m.assignment for m in members), TIMEOUT_S,
                   lambda: {m.name: sorted(m.assignment) for m in members}, members)
        produce_sequenced(bootstrap, topic, PARTITIONS, RECORDS)
        wait_until(lambda: sum(len(m.consumed) for m in members) >= PARTITIONS * RECORDS, TIMEOUT_S,
                   lambda: {m.name: len(m.consumed) for m in members}, members)
        by_partition = sequences_by_partition(r for m in members for r in m.consumed)
        assert {p: sorted(s) for p, s in by_partition.items()} == {p: list(range(RECORDS)) for p in range(PARTITIONS)}
        for m in members:
            m.commit()
    finally:
        for m in members:
            m.close()
    assert committed_offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), RECORDS)


def test_a_kafkajs_group_rebalances_and_resumes_at_its_commits(kgc39, node):  # noqa: F811
    bootstrap = kgc39.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("k39-kafkajs")
    first, second, resume = RECORDS, RECORDS, RECORDS
    report = run_group_story(node, bootstrap, topic, group, PARTITIONS, first, second, resume)
    assert len(report["formed"]) == 3 and len(report["afterLeave"]) == 2
    total = first + second + resume
    by_partition = sequences_by_partition(
        Consumed(r["partition"], r["offset"], r["value"].encode()) for r in report["consumed"])
    assert {p: sorted(s) for p, s in by_partition.items()} == {p: list(range(total)) for p in range(PARTITIONS)}
    resumed = [r for r in report["consumed"] if r["member"] == "kafkajs-resumer"]
    assert {r["offset"] for r in resumed} == set(range(first + second, total))
    assert committed_offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), total)


def test_a_sarama_group_commits_and_a_restart_resumes_at_its_commits(kgc39, sarama_1_61):  # noqa: F811
    sarama = dataclasses.replace(sarama_1_61, kafka_version="3.9.0")
    bootstrap = kgc39.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("k39-sarama")
    produce_sequenced(bootstrap, topic, PARTITIONS, RECORDS)
    first = run_members(sarama, bootstrap, topic, group, PARTITIONS * RECORDS, members=2)
    assert len(first["held"]) == 2 and all(first["held"].values()), first["held"]
    assert sorted(r["value"] for r in first["received"]) == sorted(
        f"{p}:{s}" for p in range(PARTITIONS) for s in range(RECORDS))
    assert committed_offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), RECORDS)
    produce_sequenced(bootstrap, topic, PARTITIONS, RECORDS, first_sequence=RECORDS)
    second = run_members(sarama, bootstrap, topic, group, PARTITIONS * RECORDS)
    assert {r["offset"] for r in second["received"]} == set(range(RECORDS, 2 * RECORDS))
    assert committed_offsets(bootstrap, group) == dict.fromkeys(range(PARTITIONS), 2 * RECORDS)


def test_kafka_39_alone_gives_a_consumer_protocol_member_nothing(kafka39):
    """The control for the test above: without kgc, a KIP-848 member of the same 3.9 cluster
    never gets a partition (librdkafka finds no ConsumerGroupHeartbeat there and waits)."""
    topic = create_topic(kafka39.bootstrap, 1)
    produce_sequenced(kafka39.bootstrap, topic, 1, RECORDS)
    consumer = Consumer({"bootstrap.servers": kafka39.bootstrap, "group.id": new_name("k39-direct"),
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + CONTROL_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            assert message is None or message.error() is not None, "consumed without a KIP-848 coordinator"
        assert consumer.assignment() == []
    finally:
        consumer.close()
