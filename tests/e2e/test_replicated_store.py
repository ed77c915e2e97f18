"""`kgc serve --store replicated` in front of the suite's real Kafka: group state lives in a
compacted topic upstream, so an acknowledged commit outlives kill -9 of kgc and its disk.
A new kgc process with no data dir at all serves the offsets the killed one acknowledged,
and groups go on through it. A commit whose write hangs upstream is answered a retriable
error once the commit timeout has passed, as Kafka answers it, not when the write gives up."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from kafka.protocol.consumer.group import OffsetCommitResponse

from coordinator.probe import request_response
from coordinator.settings import host_ports
from protocol.errors import ErrorCode
from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    offsets_once_owned,
    produce_sequenced,
)
from tests.support.authorization_requests import commit, partition_errors
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
            # Synchronous commits: each answered once its batch is on the state topic's
            # replicas, in a transaction the kill may leave open (the next owner keeps it).
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


COMMIT_TIMEOUT_MS = 2_000


def test_a_commit_whose_write_hangs_upstream_is_answered_retriably_after_the_commit_timeout(kafka, tmp_path):
    state, group = new_name("kgc-state"), new_name("hung")
    topic = create_topic(kafka.bootstrap, 1)
    with kgc_in_front_of(kafka, *replicated(state), "--offsets-commit-timeout-ms", str(COMMIT_TIMEOUT_MS),
                         log_path=str(tmp_path / "kgc.log")) as kgc:
        assert offsets_once_owned(kgc.bootstrap, group) == {}     # the group's partition is served
        (address,) = host_ports(kgc.bootstrap)

        def committed(offset: int, timeout_s: float) -> int:
            answer = request_response(address, commit(group, {topic: offset}), OffsetCommitResponse,
                                      timeout_s=timeout_s)
            return partition_errors(answer)[topic]

        assert committed(1, 10) == ErrorCode.NONE
        # The broker hangs: kgc's write of the next commit (its transaction upstream) gets no
        # answer. Before, the commit waited for the write's own 30 s timeout (the client's
        # request timeout, too), and the heartbeats behind it on the connection with it.
        with kafka.paused(kafka.nodes[0].node_id):
            started = time.monotonic()
            code = committed(2, 15)
            took = time.monotonic() - started
        assert code == ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode(code).name
        assert took >= COMMIT_TIMEOUT_MS / 1000
        # The broker back: the write went on (or failed and its partition was read again);
        # commits are answered again, and what was acknowledged is there.
        wait_until(lambda: committed(3, 15) == ErrorCode.NONE, 60, lambda: "commit 3 not answered NONE")
        assert offsets_once_owned(kgc.bootstrap, group) == {0: 3}
