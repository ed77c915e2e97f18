"""Three kgc instances over one replicated store, in front of the suite's real Kafka: they
share the 50 partitions through a group upstream, any instance sends a client to the owner
of its group, and when the owner is killed (kill -9) or stopped (SIGTERM) the others take
its partitions, the members go on, and every acknowledged commit is there."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer.group import OffsetFetchRequest

from coordinator import records
from coordinator.partitioning import partition_for
from protocol.errors import ErrorCode
from tests.support.admin import create_topic, new_name, offsets_once_owned, produce_sequenced
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kgc_instances import instances, owner_of, shared_by
from tests.support.security import KafkaSocket
from tests.support.simple_group_offsets import simple_commit
from tests.support.wire_client import RawMember, WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 4
TIMEOUT_S = 60


def test_three_instances_share_the_partitions_and_route_every_group_to_its_owner(kafka, tmp_path):
    with instances(kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        assert sorted(len(i.ownership()["owned"]) for i in live) == [16, 17, 17]
        for n in range(30):
            group = f"routed-{n}"
            owner = owner_of(live, group).address
            # Any instance names the same owner.
            assert {i.coordinator_of(group) for i in live} == {(0, owner)}
        # and every instance's Metadata lists every coordinator a FindCoordinator may name:
        # librdkafka drops a broker that Metadata stops listing, its group's coordinator too
        for i in live:
            assert {j.address for j in live} <= i.listed_brokers(), i.address
        # and `kgc groups describe` through an instance that does not own a group says which does
        group = "routed-0"
        owner = owner_of(live, group)
        other = next(i for i in live if i is not owner)
        consumer = Consumer({"bootstrap.servers": other.address, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(create_topic(kafka.bootstrap, 1), 0, 3)], asynchronous=False)
        finally:
            consumer.close()
        described = subprocess.run([sys.executable, "-m", "coordinator", "groups", "--bootstrap-server",
                                    other.address, "describe", group], capture_output=True, text=True, timeout=60)
        assert described.returncode == 0, described.stderr
        assert f"coordinator {owner.address} (" in described.stdout, described.stdout


def test_consumer_offsets_read_through_any_instance_has_every_instances_commits(kafka, tmp_path):
    topic = create_topic(kafka.bootstrap, 1)
    with instances(kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        # a commit in a group of each instance's partitions, through its owner
        prefix = new_name("read")
        groups = set()
        for instance in live:
            group = next(g for g in (f"{prefix}-{n}" for n in range(1000)) if owner_of(live, g) is instance)
            simple_commit(instance.address, group, topic, {0: 7})
            groups.add(group)
        # an admin client that knows one instance lists the groups of all three, once each
        # (it asks every broker Metadata lists, and each instance lists its own groups)
        admin = AdminClient({"bootstrap.servers": live[0].address})
        listed = admin.list_consumer_groups().result(30)
        names = [g.group_id for g in listed.valid if g.group_id.startswith(prefix)]
        assert sorted(names) == sorted(groups), listed.errors
        # and a consumer of __consumer_offsets that knows one instance reads all three: each
        # partition is led by (fetched from) the instance that owns it
        consumer = Consumer({"bootstrap.servers": live[0].address, "group.id": "unused-no-commits",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("__consumer_offsets", p, OFFSET_BEGINNING) for p in range(50)])
            found: set[str] = set()

            def read() -> bool:
                for m in consumer.consume(num_messages=500, timeout=0.2):
                    assert m.error() is None, m.error()
                    key = records.deserialize_key(m.key())
                    if isinstance(key, records.OffsetCommitKey) and key.topic == topic:
                        found.add(key.group)
                return groups <= found
            wait_until(read, TIMEOUT_S, lambda: f"found {sorted(found)} of {sorted(groups)}")
        finally:
            consumer.close()


def test_members_go_on_when_their_groups_owner_is_killed_and_when_another_is_stopped(kafka, tmp_path):
    topic = create_topic(kafka.bootstrap, PARTITIONS)
    group = new_name("owned")
    with instances(kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        bootstrap = ",".join(i.address for i in live)
        members = [Member(lib, MemberSettings(bootstrap, group, topic, client_id=f"{group}-{n}")).start()
                   for n, lib in enumerate(("confluent-kafka", "java"))]
        try:
            produced = 0

            def consume_and_commit(more: int) -> None:
                nonlocal produced
                produce_sequenced(kafka.bootstrap, topic, PARTITIONS, more, first_sequence=produced)
                produced += more
                wait_until(lambda: len({(c.partition, c.offset) for m in members for c in m.consumed})
                           >= PARTITIONS * produced, TIMEOUT_S,
                           lambda: {m.name: (len(m.consumed), sorted(m.assignment)) for m in members}, members)
                for m in members:
                    m.commit()

            consume_and_commit(10)
            # kill -9 of the instance that owns the group: the others take its partitions
            victim = owner_of(live, group)
            victim.process.kill()
            live.remove(victim)
            wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
            consume_and_commit(10)
            assert offsets_once_owned(live[0].address, group) == dict.fromkeys(range(PARTITIONS), produced)
            # a planned stop of the new owner: it hands its partitions over before it leaves,
            # and the group goes on at the next owner as it was, without a rebalance
            assignments = [m.assignment_history for m in members]
            stopped = owner_of(live, group)
            assert stopped.process.stop() == 0
            live.remove(stopped)
            wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
            consume_and_commit(10)
            assert offsets_once_owned(live[0].address, group) == dict.fromkeys(range(PARTITIONS), produced)
            assert [m.assignment_history for m in members] == assignments
        finally:
            for m in members:
                m.close()


def test_an_instance_paused_past_its_session_answers_nothing_from_memory_when_it_wakes(kafka, tmp_path):
    topic = create_topic(kafka.bootstrap, 1)
    group = new_name("paused")
    with instances(kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        # given a group's offset committed through its owner
        paused = owner_of(live, group)
        others = [i for i in live if i is not paused]
        simple_commit(paused.address, group, topic, {0: 5})
        # and a member of another group of the same partition whose session ends while the
        # owner sleeps, so that the sleeper's timer for it fires, and tries to write, the
        # moment it wakes
        neighbour = next(g for g in (f"{group}-{n}" for n in range(1000)) if partition_for(g) == partition_for(group))
        asyncio.run(silent_member(paused, neighbour))
        joined = time.monotonic()
        fetch = OffsetFetchRequest[7](group_id=group, require_stable=False, topics=[
            OffsetFetchRequest[7].OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        with KafkaSocket(int(paused.address.rsplit(":", 1)[1]), timeout_s=30) as connection:
            # when the owner sleeps past its session (SIGSTOP), the others take its partitions
            # and the group commits again through the new owner
            os.kill(paused.process.proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: shared_by(others), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in others])
                simple_commit(",".join(i.address for i in others), group, topic, {0: 9})
                # (each survivor logged the move with its cause)
                assert all(f"left {paused.address}" in i.ownership()["changes"][-1]["cause"] for i in others)
                # and a client's OffsetFetch is waiting for the sleeper when it wakes
                connection.send(fetch)
                time.sleep(max(0.0, joined + MEMBER_SESSION_MS / 1000 + 1 - time.monotonic()))
            finally:
                os.kill(paused.process.proc.pid, signal.SIGCONT)
            answer = connection.receive(fetch)
        # then it does not answer from its memory of the partition (offset 5): the client is
        # sent to look for the coordinator again
        offsets = {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions}
        assert ErrorCode(answer.error_code) in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE), \
            (answer.error_code, offsets)
        # and once it is back in the group, whichever instance owns the group answers 9, the
        # sleeper too if the partition came back to it (it reads it again)
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        assert all(i.ownership()["serving"] for i in live)
        for instance in live:
            assert offsets_once_owned(instance.address, group) == {0: 9}
        # and the sleeper's failed write did not make it claim the partition back, which would
        # have fenced the instance that owns it now
        for other in others:
            assert "another kgc instance claimed it" not in Path(other.log_path).read_text()


MEMBER_SESSION_MS = 10_000


async def silent_member(instance, group: str) -> None:
    """A classic member that joins through `instance`, then never heartbeats again."""
    client = await WireClient.open(int(instance.address.rsplit(":", 1)[1]))
    try:
        await RawMember(client, group, session_timeout_ms=MEMBER_SESSION_MS).until_stable()
    finally:
        client.close()
