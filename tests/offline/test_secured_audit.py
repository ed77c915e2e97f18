"""`kgc audit --bootstrap` of a secured cluster's `__consumer_offsets` (SASL_SSL: SCRAM-SHA-512
over TLS from a test CA, Kafka's StandardAuthorizer; tests/conftest.py `secured_kafka`): Spark's
Kafka source and kgc's own live checks both log in with the same `--kafka-option` settings, the
Java client's, and the password is in nothing the audit prints or writes."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")
pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

from tests.support.kafka_dist import spark_kafka_jars  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

RECORDS = 5


def commit_past_the_end(cluster, topic: str, group: str) -> None:
    client = cluster.security.client("admin").kafka_python()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, **client)
    try:
        for i in range(RECORDS):
            producer.send(topic, f"r{i}".encode(), partition=0).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False, **client)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(100, "", -1)})
    finally:
        consumer.close()


def test_a_secured_clusters_offsets_are_audited_with_its_own_logins(secured_kafka, tmp_path):
    topic, group = secured_kafka.create_topic(f"secured-{uuid.uuid4().hex[:6]}"), f"ahead-{uuid.uuid4().hex[:6]}"
    commit_past_the_end(secured_kafka, topic, group)
    admin = secured_kafka.security.client("admin")
    options = [a for k, v in admin.java().items() for a in ("--kafka-option", f"{k}={v}")]
    report = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "coordinator.offline", "audit", "--bootstrap", secured_kafka.bootstrap,
                           *options, "--master", "local[2]", "--spark-jars",
                           ",".join(spark_kafka_jars(pyspark.__version__)), "--out", str(report)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    # the commit past the log's end: found from the records Spark read and the log end kgc's
    # check read (and, committed outside any membership, an offset of no group)
    found = {(r["type"], r["topic"], r["partition"], r["committed_offset"])
             for r in pq.read_table(report / "findings.parquet").to_pylist() if r["group"] == group}
    assert found == {("offset_above_log_end", topic, 0, 100), ("orphaned_offset", topic, 0, 100)}
    lag = [r for r in pq.read_table(report / "final_offsets.parquet").to_pylist() if r["group"] == group]
    assert [(r["log_start_offset"], r["log_end_offset"]) for r in lag] == [(0, RECORDS)]
    # credentials reach neither the output nor the report
    written = [done.stdout, done.stderr, *(p.read_bytes().decode(errors="replace")
                                           for p in Path(report).rglob("*") if p.is_file())]
    assert not [text for text in written if admin.password in text]


def test_without_the_clusters_login_the_live_checks_fail_clearly(secured_kafka, tmp_path):
    done = subprocess.run([sys.executable, "-m", "coordinator.offline", "audit", "--bootstrap", secured_kafka.bootstrap,
                           "--kafka-option", "security.protocol=SASL_SSL", "--kafka-option", "sasl.mechanism=GSSAPI",
                           "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--kafka-option sasl.mechanism=GSSAPI" in done.stderr
