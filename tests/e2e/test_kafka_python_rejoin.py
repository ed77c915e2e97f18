"""A kafka-python (3.0.12) leader that rejoins because its topic metadata changed can
complete the join in the background and never apply it: it stops heartbeating, keeps its
old partitions, and the coordinator removes it when its session expires. The fault is the
client's (docs/troubleshooting.md); these tests pin it down against kgc over sockets.

kafka-python runs the JoinGroup/SyncGroup exchange as a task on its IO thread and awaits
it only from `poll()`, and only while `need_rejoin()` is true. The leader's reason to
rejoin, "the metadata I assigned with is not the metadata I have", is cleared by the task
itself when it assigns again; if the application thread is not inside `poll()` at that
moment (or its poll timeout expires between the JoinGroup and the SyncGroup answers), the
next `poll()` sees no reason to rejoin and never collects the finished task. The test
forces that interleaving: it starts the rejoin with `poll(timeout_ms=0)` and polls again
only once kafka-python's own log says kgc's SyncGroup answer has arrived.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer
from kafka.admin import NewPartitions
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import RebalanceInProgressError
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.support.admin import (
    admin,
    create_topic,
    describe_group,
    member_assignments,
    new_name,
    produce_sequenced,
)
from tests.support.clients import commit_through_rejoin, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SESSION_TIMEOUT_MS = 1000
METADATA_MAX_AGE_MS = 300
WAIT_S = 15
RECORDS = 3


class CoordinatorLog(logging.Handler):
    """kafka-python's group coordinator log lines (DEBUG and up), as text."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)


@pytest.fixture
def coordinator_log() -> Iterator[CoordinatorLog]:
    handler, logger = CoordinatorLog(), logging.getLogger("kafka.coordinator")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
def leader(kgc, coordinator_log) -> Iterator[tuple[KafkaConsumer, str, str]]:
    """A static kafka-python member alone in its group (so its leader) on a 1-partition
    topic, polled until it owns the partition; its log is captured from the start."""
    topic, group = create_topic(kgc.bootstrap, 1), new_name("rejoin")
    consumer = KafkaConsumer(
        topic, bootstrap_servers=kgc.bootstrap, group_id=group, client_id=group, group_instance_id="instance-0",
        enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=100, partition_assignment_strategy=(RoundRobinPartitionAssignor,),
        metadata_max_age_ms=METADATA_MAX_AGE_MS)
    try:
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        assert partitions(consumer) == {0}
        yield consumer, topic, group
    finally:
        consumer.close(autocommit=False)


def partitions(consumer: KafkaConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def change_partition_count(kgc, consumer: KafkaConsumer, topic: str) -> None:
    """Two more partitions (CreatePartitions through kgc): the leader's next metadata refresh
    (in the background) shows it a different topic than it assigned. Waits (not polling)
    until the leader knows the new partitions and wants to rejoin for that reason."""
    client = admin(kgc.bootstrap)
    try:
        client.create_partitions({topic: NewPartitions(total_count=3)})
    finally:
        client.close()
    wait_until(lambda: len(consumer.partitions_for_topic(topic)) > 1 and consumer._coordinator.need_rejoin(),
               WAIT_S, lambda: "the leader never saw the topic change")


def test_a_kafka_python_leader_that_is_not_in_poll_when_its_rejoin_completes_never_applies_it(
        kgc, leader, coordinator_log):
    consumer, topic, group = leader
    change_partition_count(kgc, consumer, topic)

    consumer.poll(timeout_ms=0)  # starts the rejoin task; returns before it completes
    wait_until(lambda: coordinator_log.count("Received SyncGroup response") == 2, WAIT_S,
               lambda: "kgc's SyncGroup answer for the new generation never reached the client")
    answer = [line for line in coordinator_log.lines if "Received SyncGroup response" in line][-1]
    assert "error_code=0" in answer  # kgc answered the leader's SyncGroup, with its assignment

    # The application polls on as usual, well past the session timeout.
    produce_sequenced(kgc.bootstrap, topic, 1, RECORDS)
    offsets = []
    deadline = time.monotonic() + 3 * SESSION_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        offsets += [r.offset for batch in consumer.poll(timeout_ms=100).values() for r in batch]

    assert partitions(consumer) == {0}, "the client applied the new assignment: kafka-python is fixed"
    assert not consumer._coordinator.need_rejoin()  # so its poll() never collects the finished join
    assert coordinator_log.count("Enabling heartbeat") == 1  # only the first join's
    assert offsets == list(range(RECORDS))  # it still reads its old partition, outside the group
    coordinator_metrics = consumer.metrics()["consumer-coordinator-metrics"]
    assert coordinator_metrics["last-heartbeat-seconds-ago"] > SESSION_TIMEOUT_MS / 1000  # how to spot it
    with pytest.raises(RebalanceInProgressError):  # and every commit fails, in the client, for good
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(0, "", -1)})
    description = describe_group(kgc.bootstrap, group)
    # Its session expired. The group, empty and with no offsets, may already be deleted (Dead)
    # by kgc's periodic cleanup, as Kafka's would be: the session-wide kgc runs it every 10 min.
    assert description["members"] == [] and description["group_state"] in ("Empty", "Dead"), description


def test_a_commit_that_awaits_the_rejoin_recovers_the_stalled_leader(kgc, leader, coordinator_log):
    """The workaround the test harness uses (and an application can): on
    RebalanceInProgressError, request a rejoin, await it to its end, commit again."""
    consumer, topic, group = leader
    change_partition_count(kgc, consumer, topic)
    consumer.poll(timeout_ms=0)
    wait_until(lambda: coordinator_log.count("Received SyncGroup response") == 2, WAIT_S,
               lambda: "kgc's SyncGroup answer for the new generation never reached the client")
    consumer.poll(timeout_ms=100)
    assert not consumer._coordinator.need_rejoin() and consumer._coordinator.rebalance_in_progress()  # stalled

    commit_through_rejoin(consumer, {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})

    new_partitions = set(consumer.partitions_for_topic(topic))
    assert partitions(consumer) == new_partitions and len(new_partitions) > 1
    assert consumer.committed(TopicPartition(topic, 0)) == 1
    description = describe_group(kgc.bootstrap, group)
    assert description["group_state"] == "Stable"
    assert member_assignments(description) == {group: frozenset(new_partitions)}


def test_the_same_leader_polling_through_its_rejoin_applies_the_new_assignment(kgc, leader, coordinator_log):
    """The control: the same steps, but `poll()` awaits the rejoin task to its end."""
    consumer, topic, group = leader
    change_partition_count(kgc, consumer, topic)

    consumer.poll(timeout_ms=2000)  # joins, syncs and applies within this one call

    new_partitions = set(consumer.partitions_for_topic(topic))
    assert len(new_partitions) > 1 and partitions(consumer) == new_partitions
    assert coordinator_log.count("Enabling heartbeat") == 2
    description = describe_group(kgc.bootstrap, group)
    assert description["group_state"] == "Stable"
    assert member_assignments(description) == {group: frozenset(new_partitions)}
