"""The upstream coordinator asked as a client would ask it (`UpstreamGroups.snapshot`), on the
suite's real Kafka: what adoption learns about a group, and in how many round trips."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamUnavailable
from coordinator.gateway.upstream_groups import UpstreamGroups
from coordinator.group.adopt import AdoptedOffset
from tests.support.admin import create_topic, new_name
from tests.support.clients import CONSUMER_PROTOCOL, Member, MemberSettings, wait_until
from tests.support.kafka import KafkaCluster
from tests.support.simple_group_offsets import simple_commit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class CountingCluster(UpstreamCluster):
    """The real cluster client; counts the requests kgc's own connections have in flight
    at once, so a test can tell questions asked together from questions asked in turn."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.waves: list[int] = []   # requests in flight when each was sent

    async def own_connection(self, host, port, **kwargs):
        connection = await super().own_connection(host, port, **kwargs)
        send = connection.send

        def counted(correlation_id, payload, expect_answer):
            self.in_flight += 1
            self.waves.append(self.in_flight)
            answer = send(correlation_id, payload, expect_answer)
            answer.add_done_callback(lambda _: setattr(self, "in_flight", self.in_flight - 1))
            return answer
        connection.send = counted
        return connection


@pytest.fixture
async def upstream(kafka):
    host, port = kafka.bootstrap.split(":")
    cluster = CountingCluster([(host, int(port))])
    cluster.start()
    await cluster.wait_reachable()
    groups = UpstreamGroups(cluster)
    # A fresh Kafka creates __consumer_offsets at the first FindCoordinator and answers
    # COORDINATOR_NOT_AVAILABLE until its partitions have leaders.
    for _ in range(100):
        try:
            await groups.snapshot(new_name("warm-up"))
            break
        except UpstreamUnavailable:
            await asyncio.sleep(0.1)
    cluster.waves.clear()
    yield groups, cluster
    await groups.close()
    await cluster.close()


async def test_a_group_kafka_never_saw_is_dead_and_empty_after_two_round_trips(upstream):
    groups, cluster = upstream
    found = await groups.snapshot(new_name("unknown"))
    assert (found.state, found.members, found.offsets, found.live) == ("Dead", (), (), False)
    # FindCoordinator alone, then DescribeGroups, OffsetFetch and ConsumerGroupDescribe together.
    assert cluster.waves == [1, 1, 2, 3], cluster.waves


async def test_a_simple_groups_offsets_are_all_found(kafka, upstream):
    groups, _ = upstream
    topic, group = create_topic(kafka.bootstrap, 3), new_name("simple")
    await asyncio.to_thread(simple_commit, kafka.bootstrap, group, topic, {0: 4, 2: 9})
    found = await groups.snapshot(group)
    assert (found.state, found.members) == ("Empty", ())
    assert sorted(found.offsets) == [AdoptedOffset(topic, 0, 4, -1, ""), AdoptedOffset(topic, 2, 9, -1, "")]


@pytest.mark.parametrize("library", ["kafka-python", CONSUMER_PROTOCOL])
async def test_a_live_group_shows_its_members_classic_or_kip848(kafka, upstream, library):
    """A classic group's ConsumerGroupDescribe answer (not a consumer group) is asked with
    the others and ignored; a KIP-848 group, Dead to DescribeGroups, is found by it."""
    groups, _ = upstream
    topic, group = create_topic(kafka.bootstrap, 2), new_name("live")
    member = Member(library, MemberSettings(kafka.bootstrap, group, topic, client_id=new_name("m"))).start()
    try:
        await asyncio.to_thread(wait_until, lambda: member.assignment == {0, 1}, 60,
                                lambda: f"assignment {member.assignment}")
        found = await groups.snapshot(group)
    finally:
        await asyncio.to_thread(member.close)
    assert (found.state, found.protocol_type, len(found.members), found.live) == ("Stable", "consumer", 1, True)


@pytest.fixture(scope="module")
def fresh_kafka(tmp_path_factory):
    """A Kafka broker of its own, whose group coordinator nobody has asked for yet: it has no
    `__consumer_offsets` until the first FindCoordinator creates it."""
    with KafkaCluster(tmp_path_factory.mktemp("fresh-kafka")) as cluster:
        yield cluster


async def test_a_cluster_whose_coordinator_nobody_used_yet_is_asked_again_until_it_is_ready(fresh_kafka):
    # given a cluster that has never had a group (kgc put in front of a new cluster)
    host, port = fresh_kafka.bootstrap.split(":")
    cluster = UpstreamCluster([(host, int(port))])
    cluster.start()
    groups = UpstreamGroups(cluster)
    try:
        await cluster.wait_reachable()
        # when adoption asks about a group: the first FindCoordinator answers
        # COORDINATOR_NOT_AVAILABLE while Kafka creates __consumer_offsets
        found = await groups.snapshot(new_name("first"))
    finally:
        await groups.close()
        await cluster.close()
    # then kgc asked again until it was ready, rather than failing the member's first request
    assert (found.state, found.members, found.offsets, found.live) == ("Dead", (), (), False)
