"""kgc in front of older Kafka lines, a smaller set than in front of Kafka 4.4: the last 3.x line
and the first 4.x line. Classic groups of the Java client and librdkafka, of kafka-python and
aiokafka, of kafkajs and of sarama (IBM/sarama told the cluster's version); KIP-848 consumer
groups, which a 3.9 cluster does not offer on its own (its consumer protocol is a preview, off
unless enabled): kgc brings them; a group adopted from the cluster's own coordinator and
exported back; exactly-once copies, in whichever transaction protocol the cluster finalized
(KIP-890's version 2 from Kafka 4.0); and several instances over the replicated store."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest
from confluent_kafka import Consumer

from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    offsets_once_owned,
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
from tests.support.cut_over import group_moves_to_kgc_and_back
from tests.support.eos import (
    advertised_transactions,
    assert_exactly_once,
    copy_transactionally,
    copy_with_java_loop,
    copy_with_kafkas_copier,
    flows_used,
    seed,
    topics,
    txn_requests,
)
from tests.support.kafka import KafkaCluster
from tests.support.kafka_dist import KAFKA_OLD_VERSIONS
from tests.support.kafkajs import node, run_group_story  # noqa: F401 (node: a fixture, Node and kafkajs or a skip)
from tests.support.kgc import KGC_GROUP_FLAGS, kgc_in_front_of
from tests.support.kgc_instances import instances, owner_of, shared_by
from tests.support.ports import free_port
from tests.support.sarama import run_members, sarama_1_61  # noqa: F401 (a fixture: IBM/sarama's programs or a skip)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 4
RECORDS = 10
COPIED = 300
TIMEOUT_S = 60
CONTROL_S = 10    # what a KIP-848 member gets from Kafka 3.9 alone in this long: nothing


@pytest.fixture(scope="module", params=KAFKA_OLD_VERSIONS, ids=lambda version: f"kafka-{version}")
def older_kafka(request, tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp(f"kafka-{request.param}"), version=request.param) as cluster:
        yield cluster


@dataclasses.dataclass(frozen=True)
class Front:
    """kgc in front of the older cluster: where clients go, and its metrics."""
    bootstrap: str
    http_port: int


@pytest.fixture(scope="module")
def older_kgc(older_kafka, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("kgc") / "kgc.log"
    http_port = free_port()
    with kgc_in_front_of(older_kafka, *KGC_GROUP_FLAGS, "--http-port", str(http_port),
                         log_path=str(log_path)) as proc:
        yield Front(proc.bootstrap, http_port)


def major(version: str) -> int:
    return int(version.split(".")[0])


def java_flow(cluster: KafkaCluster) -> set[str]:
    """The transaction protocol the Java client takes on `cluster` (tests/support/eos.py,
    `flows_used`): KIP-890's where it finalized transaction version 2, as from Kafka 4.0."""
    return {"v2"} if major(cluster.version) >= 4 else {"v1"}


def release_line(version: str) -> str:
    """3.9.1 -> 3.9.0: the version a client that asks for one (sarama) is told."""
    line_major, line_minor, _ = version.split(".")
    return f"{line_major}.{line_minor}.0"


@pytest.mark.parametrize("libraries", [("java", "confluent-kafka"), ("kafka-python", "aiokafka"),
                                       (JAVA_CONSUMER_PROTOCOL, CONSUMER_PROTOCOL)],
                         ids=["classic", "classic-python", "consumer-protocol"])
def test_a_mixed_group_shares_the_topic_and_commits(older_kgc, libraries):
    bootstrap = older_kgc.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("older")
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


def test_a_kafkajs_group_rebalances_and_resumes_at_its_commits(older_kgc, node):  # noqa: F811
    bootstrap = older_kgc.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("older-kafkajs")
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


def test_a_sarama_group_commits_and_a_restart_resumes_at_its_commits(older_kgc, older_kafka, sarama_1_61):  # noqa: F811
    sarama = dataclasses.replace(sarama_1_61, kafka_version=release_line(older_kafka.version))
    bootstrap = older_kgc.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("older-sarama")
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


def test_a_group_at_the_clusters_own_coordinator_moves_to_kgc_and_back(older_kgc, older_kafka):
    """Adoption on first use from the older coordinator, and `kgc export` back to it."""
    group_moves_to_kgc_and_back(older_kafka.bootstrap, older_kgc.bootstrap, ("java", "confluent-kafka", "kafka-python"))


@pytest.mark.parametrize("older_kafka", [v for v in KAFKA_OLD_VERSIONS if major(v) == 3], indirect=True,
                         ids=lambda version: f"kafka-{version}")
def test_kafka_3_alone_gives_a_consumer_protocol_member_nothing(older_kafka):
    """The control for the consumer-protocol case above: without kgc, a KIP-848 member of a 3.9
    cluster never gets a partition (librdkafka finds no ConsumerGroupHeartbeat there and waits).
    Kafka 4 serves KIP-848 groups itself."""
    topic = create_topic(older_kafka.bootstrap, 1)
    produce_sequenced(older_kafka.bootstrap, topic, 1, RECORDS)
    consumer = Consumer({"bootstrap.servers": older_kafka.bootstrap, "group.id": new_name("older-direct"),
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


def test_kgc_offers_the_transaction_version_the_cluster_finalized(older_kgc, older_kafka):
    # Kafka 4.0 formats a new cluster with transaction.version 2; 3.9 knows only version 1
    _, upstream = advertised_transactions(older_kafka.bootstrap)
    _, through_kgc = advertised_transactions(older_kgc.bootstrap)
    assert through_kgc.get("transaction.version", 0) == upstream.get("transaction.version", 0)
    assert upstream.get("transaction.version", 0) == (2 if major(older_kafka.version) >= 4 else 0)


def test_the_java_clients_copier_copies_exactly_once_in_the_clusters_transaction_protocol(older_kgc, older_kafka):
    """Kafka's TransactionalMessageCopier (the Java client 4.4), random aborts: KIP-890's flow
    where the cluster finalized transaction version 2, AddOffsetsToTxn's before."""
    before = txn_requests(older_kgc.http_port)
    copy_with_kafkas_copier(older_kafka, older_kgc.bootstrap, COPIED)
    assert flows_used(before, txn_requests(older_kgc.http_port)) == java_flow(older_kafka)


def test_a_kip848_member_of_the_java_client_copies_exactly_once(older_kgc, older_kafka):
    """sendOffsetsToTransaction from a `group.protocol=consumer` member: on 3.9 only kgc serves
    its group, and the cluster's transactions take the classic flow."""
    before = txn_requests(older_kgc.http_port)
    copy_with_java_loop(older_kafka, older_kgc.bootstrap, COPIED, "consumer")
    assert flows_used(before, txn_requests(older_kgc.http_port)) == java_flow(older_kafka)


def test_confluent_kafka_copies_exactly_once(older_kgc, older_kafka):
    source, target = topics(older_kafka)
    inputs = seed(older_kafka.bootstrap, source, COPIED)
    group = f"older-eos-{uuid.uuid4().hex[:6]}"
    done = copy_transactionally(older_kgc.bootstrap, group, source, target, COPIED, abort_every=3)
    assert done["aborted"] > 0
    assert_exactly_once(older_kafka, older_kgc.bootstrap, group, source, target, inputs)


def test_three_instances_over_the_replicated_store_keep_commits_through_a_kill_9_of_the_owner(older_kafka, tmp_path):
    """The state in a topic of the older cluster, written in kgc's own transactions (the
    classic flow, which every version serves): a group of librdkafka and the Java client
    commits, its owner is killed, and the next owner serves what was committed."""
    topic, group = create_topic(older_kafka.bootstrap, PARTITIONS), new_name("older-replicated")
    with instances(older_kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        bootstrap = ",".join(i.address for i in live)
        members = [Member(lib, MemberSettings(bootstrap, group, topic, f"{group}-{n}")).start()
                   for n, lib in enumerate(("confluent-kafka", "java"))]
        try:
            produce_sequenced(older_kafka.bootstrap, topic, PARTITIONS, RECORDS)
            wait_until(lambda: len({(c.partition, c.offset) for m in members for c in m.consumed})
                       >= PARTITIONS * RECORDS, TIMEOUT_S,
                       lambda: {m.name: (len(m.consumed), sorted(m.assignment)) for m in members}, members)
            for m in members:
                m.commit()
            victim = owner_of(live, group)
            victim.process.kill()
            live.remove(victim)
            wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
            assert offsets_once_owned(live[0].address, group) == dict.fromkeys(range(PARTITIONS), RECORDS)
        finally:
            for m in members:
                m.close()
