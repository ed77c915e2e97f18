"""Group state left in a real broker's `__consumer_offsets` by real kafka-python clients,
and `kgc audit` run on it as a user runs it (its own process and Spark session)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from coordinator.offline.upstream import UpstreamOffsets

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


def java_commit_by_id(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """The Java client (kafka-clients 4.4, tests/java/JavaMember.java) with
    group.protocol=consumer commits `offset` of `topic`-`partition`: its CommitRequestManager
    names topics by id when it knows them all, so the coordinator gets OffsetCommit v10."""
    from tests.support.java_client import JavaProcess

    java = JavaProcess(bootstrap, group, topic, {"group.protocol": "consumer", "metadata.max.age.ms": "1000"})
    try:
        deadline = time.monotonic() + 60
        while partition not in java.ask("assignment")["assignment"]:
            assert time.monotonic() < deadline, f"{group} got no assignment"
            java.ask("poll 500")
        assert java.ask(f"commit {partition}={offset}")["committed"] == {str(partition): offset}
    finally:
        java.close()


def topic_ids(bootstrap: str) -> dict[str, uuid.UUID]:
    return UpstreamOffsets(bootstrap).log_offsets_and_topic_ids()[1]


def recreate(bootstrap: str, topic: str, partitions: int = 1) -> uuid.UUID:
    """Deletes `topic` and creates it again under the same name; its new id."""
    old = topic_ids(bootstrap)[topic]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
        wait_until(lambda: topic not in topic_ids(bootstrap), f"{topic} still listed")
        # Deletion finishes asynchronously: creating again is refused until it has.
        wait_until(lambda: _created(admin, topic, partitions), f"{topic} not created again")
    finally:
        admin.close()
    wait_until(lambda: topic in topic_ids(bootstrap), f"{topic} not listed again")
    new = topic_ids(bootstrap)[topic]
    assert new != old
    return new


def _created(admin: KafkaAdminClient, topic: str, partitions: int) -> bool:
    from kafka.errors import TopicAlreadyExistsError

    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        return False
    return True


def copy_offsets_log(cluster, out: Path) -> Path:
    """The broker's `__consumer_offsets` partition directories, copied to `out`."""
    out.mkdir(parents=True)
    for directory in (cluster.nodes[0].directory / "data").glob("__consumer_offsets-*"):
        shutil.copytree(directory, out / directory.name)
    return out
