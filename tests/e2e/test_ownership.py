"""Three kgc instances over one replicated store, in front of the suite's real Kafka: they
share the 50 partitions through a group upstream, any instance sends a client to the owner
of its group, and when the owner is killed (kill -9) or stopped (SIGTERM) the others take
its partitions, the members go on, and every acknowledged commit is there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.embedded import free_port
from coordinator.partitioning import partition_for
from coordinator.probe import request_response
from tests.e2e.admin import create_topic, new_name, offsets_once_owned, produce_sequenced
from tests.e2e.clients import Member, MemberSettings, wait_until
from tests.ops.support import get_json
from tests.support.kgc import KgcProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

INSTANCES = 3
PARTITIONS = 4
SESSION_TIMEOUT_MS = 6_000      # the upstream's group.min.session.timeout.ms
TIMEOUT_S = 60


class Instance:
    def __init__(self, kafka, state: str, log_path: str):
        self.http_port = free_port()
        # On one host each instance needs its own listener port per upstream broker.
        brokers = [a for node in kafka.nodes for a in ("--broker-port", f"{node.node_id}={free_port()}")]
        self.process = KgcProcess("--upstream", kafka.bootstrap, *brokers, "--store", "replicated", "--state-topic", state,
                                  "--state-topic-replication-factor", "1", "--state-topic-min-insync-replicas", "1",
                                  "--ownership-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                                  "--http-port", str(self.http_port), log_path=log_path)

    @property
    def address(self) -> str:
        return self.process.bootstrap

    def ownership(self) -> dict:
        return asyncio.run(get_json(self.http_port, "/v1/ownership"))[1]

    def coordinator_of(self, group: str) -> tuple[int, str]:
        host, port = self.address.split(":")
        response = request_response((host, int(port)), FindCoordinatorRequest[3](key=group, key_type=0),
                                    FindCoordinatorResponse)
        return response.error_code, f"{response.host}:{response.port}"


@contextlib.contextmanager
def instances(kafka, tmp_path, state: str) -> Iterator[list[Instance]]:
    started = [Instance(kafka, state, str(tmp_path / f"kgc-{i}.log")) for i in range(INSTANCES)]
    try:
        for instance in started:
            instance.process.start(timeout_s=60)
        yield started
    finally:
        for instance in started:
            instance.process.stop()


def shared_by(live: list[Instance]) -> bool:
    """Every partition owned by exactly one live instance, and every live instance agrees on the map."""
    views = [i.ownership() for i in live]
    owned = [set(v["owned"]) for v in views]
    maps = {tuple(sorted(v["owners"].items())) for v in views}
    return (len(maps) == 1 and sum(map(len, owned)) == 50 and set().union(*owned) == set(range(50))
            and all(owned) and set(dict(next(iter(maps))).values()) == {i.address for i in live})


def owner_of(live: list[Instance], group: str) -> Instance:
    partition = str(partition_for(group))
    return next(i for i in live if i.ownership()["owners"].get(partition) == i.address)


def test_three_instances_share_the_partitions_and_route_every_group_to_its_owner(kafka, tmp_path):
    with instances(kafka, tmp_path, new_name("kgc-state")) as live:
        wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
        assert sorted(len(i.ownership()["owned"]) for i in live) == [16, 17, 17]
        for n in range(30):
            group = f"routed-{n}"
            owner = owner_of(live, group).address
            # Any instance names the same owner.
            assert {i.coordinator_of(group) for i in live} == {(0, owner)}


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
            # a planned stop of the new owner: it hands its partitions over before it leaves
            stopped = owner_of(live, group)
            assert stopped.process.stop() == 0
            live.remove(stopped)
            wait_until(lambda: shared_by(live), TIMEOUT_S, lambda: [i.ownership()["owned"] for i in live])
            consume_and_commit(10)
            assert offsets_once_owned(live[0].address, group) == dict.fromkeys(range(PARTITIONS), produced)
        finally:
            for m in members:
                m.close()
