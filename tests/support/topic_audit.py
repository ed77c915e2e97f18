"""Group state left in a real broker's `__consumer_offsets` by real kafka-python clients,
and `kgc audit` run on it as a user runs it (its own process and Spark session)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

AUDIT_TIMEOUT_S = 180


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(count):
            producer.send(topic, f"r{i}".encode(), partition=partition).get(timeout=30)
    finally:
        producer.close()


def member(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    """A consumer of `group` that has joined it and holds `topic`'s partitions."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        assert time.monotonic() < deadline, f"{group} got no assignment"
        consumer.poll(timeout_ms=500)
    return consumer


def commit(consumer: KafkaConsumer, topic: str, partition: int, offset: int) -> None:
    consumer.commit({TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)})


def wait_until(condition, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def kgc_audit(*args: str, timeout_s: float = AUDIT_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator.offline", "audit", *args],
                          capture_output=True, text=True, timeout=timeout_s)


def findings(report: Path) -> set[tuple]:
    rows = pq.read_table(report / "findings.parquet").to_pylist()
    return {(r["type"], r["group"], r["topic"], r["partition"], r["committed_offset"]) for r in rows}


def audited(result: subprocess.CompletedProcess, report: Path) -> set[tuple]:
    assert result.returncode == 0, result.stdout + result.stderr
    return findings(report)
