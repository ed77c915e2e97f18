"""The replicated store on the three-node cluster (replication factor 3, min ISR 2): the
broker leading the group's state partition is SIGKILLed while a member commits
synchronously; commits go on once Kafka elects a new leader, and every acknowledged commit
is there afterwards, read by a new kgc process with no disk after kill -9 of the first."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from coordinator.partitioning import partition_for
from tests.support.admin import new_name, offsets_once_owned
from tests.support.kafka import partition_leader
from tests.support.kgc import KgcProcess, kgc_in_front_of

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

BEFORE, AFTER = 20, 20          # acknowledged commits before the kill, and after it
DEADLINE_S = 120


def test_acknowledged_commits_survive_the_state_partitions_leader_sigkilled_and_kill_9_of_kgc(kafka3, tmp_path):
    state, group = new_name("kgc-state"), new_name("failover")
    topic = kafka3.create_topic(new_name("input"), 1)
    flags = ("--store", "replicated", "--state-topic", state)
    with kgc_in_front_of(kafka3, *flags, log_path=str(tmp_path / "first.log")) as first:
        consumer = Consumer({"bootstrap.servers": first.bootstrap, "group.id": group, "enable.auto.commit": False})
        acknowledged, refused, victim = 0, 0, None
        deadline = time.monotonic() + DEADLINE_S
        try:
            while acknowledged < BEFORE + AFTER and time.monotonic() < deadline:
                if acknowledged == BEFORE and victim is None:
                    victim = partition_leader(kafka3.bootstrap, state, partition_for(group))
                    kafka3.kill_node(victim)
                try:
                    consumer.commit(offsets=[TopicPartition(topic, 0, acknowledged + 1)], asynchronous=False)
                    acknowledged += 1
                except KafkaException:
                    refused += 1      # not acknowledged: the member retries, as an application does
        finally:
            consumer.close()
            if victim is not None:
                kafka3.start_node(victim)
        assert acknowledged == BEFORE + AFTER, f"{acknowledged} commits acknowledged, {refused} refused"
        first.kill()
    second = KgcProcess("--upstream", kafka3.bootstrap, *flags, log_path=str(tmp_path / "second.log"))
    second.start(timeout_s=90)
    try:
        assert offsets_once_owned(second.bootstrap, group) == {0: BEFORE + AFTER}
    finally:
        second.stop()
