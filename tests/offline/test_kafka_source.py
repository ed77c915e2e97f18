"""`kgc audit --bootstrap`: a real broker's `__consumer_offsets`, read through Spark's Kafka
source, audited as kgc audits its own files.

One broker for the module, with retention that acts within seconds. Real kafka-python
consumers drive the groups: one commits as it should, one commits an offset below its
last, one commits past the log's end, one commits 0 on a topic whose records retention
then deletes unconsumed. `kgc audit` runs as a user runs it (its own process and Spark
session, the connector's jars from Maven), and must find exactly those; a copy of the
broker's log directories on disk must give the same findings. The audit runs on
`local[2]` and on a standalone Spark cluster (master and one worker) started here.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")
pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from kafka import KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

from coordinator.offline.upstream import UpstreamOffsets  # noqa: E402
from tests.support.kafka import KafkaCluster  # noqa: E402
from tests.support.kafka_dist import spark_kafka_jars  # noqa: E402
from tests.support.spark_cluster import standalone_spark, submit  # noqa: E402
from tests.support.topic_audit import (  # noqa: E402
    audited,
    commit,
    copy_offsets_log,
    findings,
    java_commit_by_id,
    kgc_audit,
    member,
    produce,
    recreate,
    topic_ids,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

EVENTS = "events"          # 2 partitions, 10 records each
EXPIRING = "expiring"      # records deleted by retention before "late" reads them
DOOMED = "doomed"          # deleted under group "doomed"
REBORN = "reborn"          # deleted and created again after a Java client committed to it by id
REBORN_KGC = "reborn-kgc"  # the same, committed through kgc
RETENTION = {"log.retention.check.interval.ms": "500", "log.segment.delete.delay.ms": "0",
             "log.initial.task.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("kafka-audit"), settings=RETENTION) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.create_topics([NewTopic(EVENTS, 2, 1), NewTopic(DOOMED, 1, 1), NewTopic(REBORN, 1, 1),
                                 NewTopic(REBORN_KGC, 1, 1),
                                 NewTopic(EXPIRING, 1, 1, topic_configs={"retention.ms": "1000",
                                                                         "segment.ms": "300"})])
        finally:
            admin.close()
        yield cluster


@pytest.fixture(scope="module")
def groups(cluster):
    """The groups, driven by real consumers; what the audit must find, as
    (type, group, topic, partition, committed offset)."""
    bootstrap = cluster.bootstrap
    for p in (0, 1):
        produce(bootstrap, EVENTS, p, 10)
    produce(bootstrap, EXPIRING, 0, 5)

    steady = member(bootstrap, "steady", EVENTS)
    while sum(len(v) for v in steady.poll(timeout_ms=500).values()) or steady.position(TopicPartition(EVENTS, 0)) < 10:
        pass
    steady.commit()
    steady.close()

    regress = member(bootstrap, "regress", EVENTS)
    commit(regress, EVENTS, 0, 8)
    commit(regress, EVENTS, 0, 3)
    regress.close()

    ahead = member(bootstrap, "ahead", EVENTS)
    commit(ahead, EVENTS, 1, 1000)
    ahead.close()

    # Offsets committed in transactions: one that commits (4), then one that aborts (9).
    txn = member(bootstrap, "txn", EVENTS)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="audit-txn")
    try:
        producer.init_transactions()
        for offset, end in ((4, producer.commit_transaction), (9, producer.abort_transaction)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction({TopicPartition(EVENTS, 0): OffsetAndMetadata(offset, "", -1)},
                                                 txn.group_metadata())
            end()
    finally:
        producer.close()
        txn.close()

    produce(bootstrap, DOOMED, 0, 3)
    doomed = member(bootstrap, "doomed", DOOMED)
    commit(doomed, DOOMED, 0, 2)
    doomed.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([DOOMED])
    finally:
        admin.close()
    wait_until(lambda: not any(t == DOOMED for t, _ in UpstreamOffsets(bootstrap).log_offsets()),
               f"{DOOMED} still listed")

    late = member(bootstrap, "late", EXPIRING)
    commit(late, EXPIRING, 0, 0)
    late.close()
    # A record after segment.ms rolls the segment holding the first five; retention then
    # deletes it, with "late" still at 0.
    time.sleep(0.4)
    produce(bootstrap, EXPIRING, 0, 1)
    wait_until(lambda: UpstreamOffsets(bootstrap).log_offsets().get((EXPIRING, 0), (0, 0))[0] > 0,
               f"retention deleted nothing of {EXPIRING}-0")
    return {
        ("offset_regression", "regress", EVENTS, 0, 3),
        ("offset_above_log_end", "ahead", EVENTS, 1, 1000),
        ("offset_below_log_start", "late", EXPIRING, 0, 0),
    }


@pytest.fixture(scope="module")
def jars() -> str:
    return ",".join(spark_kafka_jars(pyspark.__version__))


def test_the_topic_audited_through_spark_finds_exactly_what_the_clients_did(cluster, groups, jars, tmp_path):
    report = tmp_path / "report"
    result = kgc_audit("--bootstrap", cluster.bootstrap, "--master", "local[2]", "--spark-jars", jars,
                       "--out", str(report))
    assert audited(result, report) == groups
    summary = json.loads((report / "summary.json").read_text())
    assert summary["data_dir"] == f"kafka://{cluster.bootstrap}/__consumer_offsets"
    assert summary["upstream"] == cluster.bootstrap
    lag = {(r["group"], r["topic"], r["partition"]): r
           for r in pq.read_table(report / "final_offsets.parquet").to_pylist()}
    assert {k for k in lag if k[0] == "steady"} == {("steady", EVENTS, 0), ("steady", EVENTS, 1)}
    assert (lag["steady", EVENTS, 0]["log_end_offset"], lag["ahead", EVENTS, 1]["log_end_offset"]) == (10, 10)
    # Kafka's coordinator writes tombstones for the offsets of a topic it deletes: nothing
    # of "doomed" is left to report (offset_of_deleted_topic is for logs that kept them).
    assert not {k for k in lag if k[0] == "doomed"}
    # read_committed: the aborted transaction's commit is not read (the log on disk has it).
    assert lag["txn", EVENTS, 0]["offset"] == 4


def test_the_topic_audited_on_a_standalone_spark_cluster(cluster, groups, jars, tmp_path):
    """submit.sh on a master and one worker started here: the executor reads the topic."""
    report = tmp_path / "report"
    with standalone_spark(tmp_path, workers=1) as spark_cluster:
        # The jars from the test cache, not --packages: the run needs no Ivy download.
        out = submit(spark_cluster, "audit", "--bootstrap", cluster.bootstrap, "--out", str(report),
                     submit_args=f"--jars {jars}", env={"KGC_SPARK_KAFKA_PACKAGE": ""})
    assert "findings:" in out
    assert findings(report) == groups


def test_a_copy_of_the_log_on_disk_gives_the_same_findings(cluster, groups, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for directory in (cluster.nodes[0].directory / "data").glob("__consumer_offsets-*"):
        shutil.copytree(directory, copy / directory.name)
    report = tmp_path / "report"
    result = kgc_audit(str(copy), "--engine", "python", "--upstream", cluster.bootstrap, "--out", str(report))
    assert audited(result, report) == groups


def test_without_the_connector_the_audit_says_which_jars_it_needs(cluster, tmp_path):
    result = kgc_audit("--bootstrap", cluster.bootstrap, "--master", "local[1]", "--out", str(tmp_path / "r"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}" in result.stderr


def test_kgcs_state_topic_audited_through_spark_finds_what_its_clients_did(cluster, jars, tmp_path):
    """`kgc audit --topic` on the replicated store's state topic: its records are in the
    `__consumer_offsets` format, and a client's transaction kgc holds open is reported."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as Tp

    from tests.support.admin import offsets_once_owned
    from tests.support.kgc import kgc_in_front_of

    state = "kgc-state-audited"
    # kgc told to keep the offsets of deleted topics: what a deletion it did not see leaves
    replicated = ("--store", "replicated", "--state-topic", state, "--state-topic-replication-factor", "1",
                  "--state-topic-min-insync-replicas", "1", "--delete-offsets-of-deleted-topics", "false")
    with kgc_in_front_of(cluster, *replicated, log_path=str(tmp_path / "kgc.log")) as kgc:
        # once the groups' partitions are served: kgc listens before it has read the state
        # topic, and librdkafka gives a synchronous commit up on COORDINATOR_LOAD_IN_PROGRESS
        for group in ("state-regress", "state-reborn", "state-txn"):
            assert offsets_once_owned(kgc.bootstrap, group) == {}
        # given a group that committed below its last commit, through kgc
        regress = Consumer({"bootstrap.servers": kgc.bootstrap, "group.id": "state-regress",
                            "enable.auto.commit": False})
        try:
            for offset in (8, 3):
                regress.commit(offsets=[Tp(EVENTS, 0, offset)], asynchronous=False)
        finally:
            regress.close()
        # and a Java client that commits by topic id (v10) to a topic then deleted and created
        # again: the record kgc keeps has the old id
        produce(cluster.bootstrap, REBORN_KGC, 0, 3)
        java_commit_by_id(kgc.bootstrap, "state-reborn", REBORN_KGC, 0, 2)
        recreate(cluster.bootstrap, REBORN_KGC)
        # and a transaction whose offsets kgc holds, still open while the audit runs
        member = Consumer({"bootstrap.servers": kgc.bootstrap, "group.id": "state-txn", "enable.auto.commit": False})
        producer = Producer({"bootstrap.servers": kgc.bootstrap, "transactional.id": "state-audit-txn",
                             "transaction.timeout.ms": 600_000})
        try:
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.send_offsets_to_transaction([Tp(EVENTS, 1, 6)], member.consumer_group_metadata(), 30)
            # once kgc's own transaction on the group's state partition has ended: kgc answers
            # when its Produce is acknowledged and ends that transaction after, and the audit
            # reads up to the last stable offset (coordinator/replicated/store.py)
            stable_to_the_end(cluster.bootstrap, state, "state-txn")
            # when the state topic is audited
            report = tmp_path / "report"
            result = kgc_audit("--bootstrap", cluster.bootstrap, "--topic", state, "--master", "local[2]",
                               "--spark-jars", jars, "--out", str(report))
            found = audited(result, report)
        finally:
            producer.abort_transaction(30)
            member.close()
    # then it finds the regression, and the transaction left open
    assert ("offset_regression", "state-regress", EVENTS, 0, 3) in found
    assert "open_transaction" in {f[0] for f in found}, found
    assert {f for f in found if f[1] == "state-reborn"} == {("offset_of_recreated_topic", "state-reborn", REBORN_KGC,
                                                              0, 2)}


def stable_to_the_end(bootstrap: str, topic: str, group: str, timeout_s: float = 60.0) -> None:
    """Waits until the partition of `topic` that holds `group` has no transaction open: its
    last stable offset is its end."""
    from kafka import KafkaConsumer

    from coordinator.partitioning import partition_for

    committed = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    uncommitted = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partitions = committed.partitions_for_topic(topic)
        assert partitions, f"{topic} has no partitions"
        tp = TopicPartition(topic, partition_for(group, len(partitions)))
        deadline = time.monotonic() + timeout_s
        while (stable := committed.end_offsets([tp])[tp]) != (end := uncommitted.end_offsets([tp])[tp]):
            assert time.monotonic() < deadline, f"{tp} stable to {stable}, not to its end {end}, after {timeout_s} s"
            time.sleep(0.2)
    finally:
        committed.close()
        uncommitted.close()


def test_an_offset_kafka_recorded_by_topic_id_before_the_topic_was_recreated(cluster, tmp_path):
    """A Java client commits to a topic by id (OffsetCommit v10) straight to Kafka, which
    writes the id into the record (OffsetCommitValue v4); the topic is deleted and created
    again. Kafka 4.4 then tombstones the offset (OffsetMetadataManager.onTopicsDeleted), so
    its live log has nothing to report; the log as it was before (a copy restored, a
    coordinator that missed the cleanup) has the offset of the old topic, reported as such."""
    from coordinator.offline.state import replay_state

    bootstrap = cluster.bootstrap
    produce(bootstrap, REBORN, 0, 3)
    java_commit_by_id(bootstrap, "reborn", REBORN, 0, 2)
    old = topic_ids(bootstrap)[REBORN]
    before = copy_offsets_log(cluster, tmp_path / "before")
    committed = replay_state(before).offsets["reborn", REBORN, 0]
    assert (committed.offset, committed.topic_id) == (2, old)

    new = recreate(bootstrap, REBORN)
    wait_until(lambda: ("reborn", REBORN, 0) not in replay_state(copy_offsets_log(
        cluster, tmp_path / f"after-{time.monotonic_ns()}")).offsets, "Kafka kept the deleted topic's offset")

    report = tmp_path / "report"
    result = kgc_audit(str(before), "--engine", "python", "--upstream", bootstrap, "--out", str(report))
    assert {f for f in audited(result, report) if f[1] == "reborn"} == {
        ("offset_of_recreated_topic", "reborn", REBORN, 0, 2)}
    [row] = [r for r in pq.read_table(report / "findings.parquet").to_pylist() if r["group"] == "reborn"]
    assert row["detail"] == f"committed to topic id {old}; the cluster's {REBORN} is topic id {new}"
