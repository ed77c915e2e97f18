"""`kgc serve --store replicated` in front of the suite's real Kafka: group state lives in a
compacted topic upstream, so an acknowledged commit outlives kill -9 of kgc and its disk.
A new kgc process with no data dir at all serves the offsets the killed one acknowledged,
and groups go on through it."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    offsets_once_owned,
    produce_sequenced,
)
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kgc import KgcProcess, kgc_in_front_of

PARTITIONS = 4
COMMITS = 30


def replicated(topic: str) -> tuple[str, ...]:
    return ("--store", "replicated", "--state-topic", topic, "--state-topic-replication-factor", "1",
            "--state-topic-min-insync-replicas", "1")


def test_acknowledged_commits_survive_kill_9_of_kgc_without_its_disk(kafka, tmp_path):
    state = new_name("kgc-state")
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("replicated")
    with kgc_in_front_of(kafka, *replicated(state), log_path=str(tmp_path / "first.log")) as first:
        # Once the group's partition is served: librdkafka gives a synchronous commit up on
        # COORDINATOR_LOAD_IN_PROGRESS, which it meets if it commits while kgc loads.
        assert offsets_once_owned(first.bootstrap, group) == {}
        consumer = Consumer({"bootstrap.servers": first.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            # Synchronous commits: each answered only once its transaction committed upstream.
            for i in range(1, COMMITS + 1):
                consumer.commit(offsets=[TopicPartition(topic, p, i * 10 + p) for p in range(PARTITIONS)],
                                asynchronous=False)
            acknowledged = {p: COMMITS * 10 + p for p in range(PARTITIONS)}
        finally:
            consumer.close()
        first.kill()
    # A new process, nothing on disk: it reads the state topic.
    second = KgcProcess("--upstream", kafka.bootstrap, *replicated(state), log_path=str(tmp_path / "second.log"))
    second.start(timeout_s=60)
    try:
        # The killed instance is in the ownership group until its session times out upstream.
        assert offsets_once_owned(second.bootstrap, group) == acknowledged
    finally:
        second.stop()


def test_a_group_forms_and_consumes_through_kgc_on_the_replicated_store(kafka, tmp_path):
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("replicated")
    produce_sequenced(kafka.bootstrap, topic, PARTITIONS, 5)
    with kgc_in_front_of(kafka, *replicated(new_name("kgc-state")), log_path=str(tmp_path / "kgc.log")) as kgc:
        members = [Member(lib, MemberSettings(kgc.bootstrap, group, topic, client_id=f"{group}-{i}")).start()
                   for i, lib in enumerate(("confluent-kafka", "java"))]
        try:
            wait_until(lambda: sum(len(m.consumed) for m in members) >= PARTITIONS * 5, 60,
                       lambda: {m.name: (len(m.consumed), sorted(m.assignment)) for m in members}, members)
            for m in members:
                m.commit()
            assert committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), 5)
        finally:
            for m in members:
                m.close()
