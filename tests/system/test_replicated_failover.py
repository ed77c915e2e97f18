"""The replicated store on the three-node cluster (replication factor 3, min ISR 2): the
broker leading the group's state partition is SIGKILLed while a member commits
synchronously; commits go on once Kafka elects a new leader, and every acknowledged commit
is there afterwards, read by a new kgc process with no disk after kill -9 of the first.
And the store's own next write after such a kill goes to the new leader, within one write
timeout, without failing the partition."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.partitioning import partition_for
from coordinator.replicated.state_topic import StateTopic
from coordinator.replicated.store import ReplicatedLogStore
from coordinator.settings import host_ports
from storage.api import LogRecord
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


async def test_the_next_write_after_the_leader_is_sigkilled_goes_to_the_new_leader(kafka3):
    """Nothing was written between the kill and the write: the store's topic metadata still
    names the dead leader. The write must ask again, not retry the dead broker until its
    timeout fails the partition (seen in tests/system/test_ha_instances.py: a member's
    OffsetCommit unanswered for 30 s).

    The partition is one whose leader is not its transactional id's coordinator: a
    coordinator killed just after a commit writes the commit marker again once it has
    moved, which the store rightly takes for a lost marker and reads the partition again
    (another path, not this one's)."""
    state = new_name("kgc-state")
    cluster = UpstreamCluster(host_ports(kafka3.bootstrap))
    cluster.start()
    await cluster.wait_reachable()
    # Long enough for Kafka to fence the dead broker (broker.session.timeout.ms, 9 s) and
    # elect a leader, with room to spare.
    store = ReplicatedLogStore(StateTopic(cluster, state, 50, replication_factor=3, min_insync_replicas=2),
                               transactional_id_prefix=state, write_timeout_ms=25_000)
    victim = None
    try:
        await store.open()
        await asyncio.gather(*(store.acquire(p) for p in range(50)))    # the transaction coordinators known
        partition, leader = await _led_apart_from_its_coordinator(cluster, kafka3.bootstrap, state)
        await store.append(partition, [LogRecord(b"k", b"before")], 1_000).durable
        victim = leader
        kafka3.kill_node(victim)
        await store.append(partition, [LogRecord(b"k", b"after")], 2_000).durable
        assert partition_leader(kafka3.bootstrap, state, partition) != victim
        assert [r.value for b in store.read(partition) for r in b.records if r.key == b"k"] == [b"before", b"after"]
    finally:
        if victim is not None:
            kafka3.start_node(victim)
        await store.close()
        await cluster.close()


async def _led_apart_from_its_coordinator(cluster: UpstreamCluster, bootstrap: str, state: str) -> tuple[int, int]:
    """A partition of the state topic and its leader, which does not coordinate the
    partition's transactional id."""
    for partition in range(50):
        leader = partition_leader(bootstrap, state, partition)
        coordinator = await cluster.find_coordinator(f"{state}.p{partition:02d}", 1)
        if coordinator.node_id != leader:
            return partition, leader
    raise AssertionError("every partition is led by its transactional id's coordinator")
