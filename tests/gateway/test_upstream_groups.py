"""The upstream coordinator asked as a client would ask it (`UpstreamGroups.snapshot`), on the
suite's real Kafka: what adoption learns about a group, in how many round trips, and where
kgc finds the group's coordinator without asking (`UpstreamCluster.group_coordinator`)."""

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
from tests.support.ports import free_port
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


class MisplacingCluster(CountingCluster):
    """Places every group's coordinator at `placed`: a broker that is not the group's
    coordinator, or an address nobody listens on, as after the leader moved or went."""

    placed: tuple[str, int] | None = None

    def group_coordinator(self, group_id):
        return self.placed


async def counting_groups(cluster_class, kafka_cluster):
    cluster = cluster_class([tuple_address(a) for a in kafka_cluster.bootstrap.split(",")])
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
    # ...and kgc's next read of the cluster shows the topic's leaders.
    for _ in range(100):
        if UpstreamCluster.group_coordinator(cluster, "any") is not None:
            break
        cluster.refresh_soon()
        await asyncio.sleep(0.05)
    cluster.waves.clear()
    return groups, cluster


def tuple_address(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


@pytest.fixture
async def upstream(kafka):
    groups, cluster = await counting_groups(CountingCluster, kafka)
    yield groups, cluster
    await groups.close()
    await cluster.close()


async def test_a_group_kafka_never_saw_is_dead_and_empty_after_one_round_trip(upstream):
    groups, cluster = upstream
    found = await groups.snapshot(new_name("unknown"))
    assert (found.state, found.members, found.offsets, found.live) == ("Dead", (), (), False)
    # No FindCoordinator: DescribeGroups, OffsetFetch and ConsumerGroupDescribe together, at
    # the leader of the group's __consumer_offsets partition.
    assert cluster.waves == [1, 2, 3], cluster.waves


async def test_kgc_places_each_group_where_kafka_says_its_coordinator_is(kafka3):
    groups, cluster = await counting_groups(CountingCluster, kafka3)
    try:
        placed = set()
        for name in (new_name(f"placed-{i}") for i in range(30)):
            found = await cluster.find_coordinator(name, 0)
            if cluster.group_coordinator(name) != (found.host, found.port):
                # a leader moved since kgc's last read: read again (a refresh asked for a
                # topic kgc has not seen), once
                await cluster.learn_topics([new_name("unseen")])
                found = await cluster.find_coordinator(name, 0)
            assert cluster.group_coordinator(name) == (found.host, found.port), name
            placed.add((found.host, found.port))
        # more than one node leads the groups asked about: the placement is not just any broker
        assert len(placed) >= 2, placed
    finally:
        await groups.close()
        await cluster.close()


@pytest.mark.parametrize("misplaced", ["another broker", "nobody listening"])
async def test_a_group_placed_at_the_wrong_address_is_found_through_find_coordinator(kafka3, misplaced):
    # given a simple group with offsets on the three-node cluster, and kgc's last read placing
    # its coordinator elsewhere: a broker that answers NOT_COORDINATOR, or one that is gone
    topic, group = create_topic(kafka3.bootstrap, 3), new_name("misplaced")
    await asyncio.to_thread(simple_commit, kafka3.bootstrap, group, topic, {1: 7})
    groups, cluster = await counting_groups(MisplacingCluster, kafka3)
    try:
        coordinator = await cluster.find_coordinator(group, 0)
        others = [(b.host, b.port) for b in cluster.brokers.values() if b.node_id != coordinator.node_id]
        cluster.placed = others[0] if misplaced == "another broker" else ("127.0.0.1", free_port())
        # when adoption takes a snapshot of it
        found = await asyncio.wait_for(groups.snapshot(group), 10)
    finally:
        await groups.close()
        await cluster.close()
    # then it asked FindCoordinator at once and found the group's offsets at its coordinator
    assert (found.state, found.offsets) == ("Empty", (AdoptedOffset(topic, 1, 7, -1, ""),))


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
