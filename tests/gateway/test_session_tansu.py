"""The gateway against a real upstream broker (Tansu): discovery, forwarding, rewriting, failures."""

from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.record.memory_records import MemoryRecords

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.gateway import Gateway
from coordinator.gateway.plan import ListenerPlan
from coordinator.gateway.rewrite import Broker
from coordinator.gateway.session import GatewaySession, UnforwardableRequest
from coordinator.gateway.upstream import UpstreamUnavailable
from protocol.errors import ErrorCode
from protocol.headers import parse_request_header
from tests.support.gateway_client import (
    SessionClient,
    create_topic,
    decode,
    fetch,
    list_offsets,
    metadata,
    new_topic_name,
    produce,
)
from tests.support.tansu import TansuBroker, free_port, request_response
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

PLAN = ListenerPlan(coordinator_node_id=2_000_000_000, advertised_host="kgc.test", bootstrap_port=9092,
                    broker_port_base=30_000)
BOUND_S = 10


def new_cluster(*addresses, **overrides) -> UpstreamCluster:
    settings = dict(plan=PLAN, refresh_interval_ms=60_000, connect_timeout_ms=1_000, request_timeout_ms=2_000,
                    backoff_initial_ms=20, backoff_max_ms=100)
    settings.update(overrides)
    return UpstreamCluster(list(addresses), **settings)


@pytest.fixture
async def cluster(tansu):
    cluster = new_cluster(tansu.address)
    cluster.start()
    await asyncio.wait_for(cluster.wait_reachable(), BOUND_S)
    yield cluster
    await cluster.close()


@pytest.fixture
async def client(cluster, tansu):
    session = GatewaySession(cluster, PLAN, tansu.node_id)
    yield SessionClient(session)
    await session.close()


def end_offset_at_upstream(broker: TansuBroker, topic: str) -> int:
    """Asked of Tansu directly: its end offsets are its own (see tests/support/tansu.py)."""
    response = request_response(broker.address, list_offsets(topic), ListOffsetsResponse)
    return response.topics[0].partitions[0].offset


async def created_topic(client: SessionClient) -> tuple[str, object]:
    name = new_topic_name()
    created = await client.call(create_topic(name))
    assert created.topics[0].error_code == ErrorCode.NONE
    described = await client.call(metadata(name))
    [topic] = described.topics
    assert topic.error_code == ErrorCode.NONE
    return name, topic.topic_id


async def test_cluster_learns_the_upstream_broker_and_its_api_ranges(tansu):
    cluster = new_cluster(tansu.address)
    changes = []
    cluster.subscribe(changes.append)
    cluster.start()
    try:
        await asyncio.wait_for(cluster.wait_reachable(), BOUND_S)
        assert cluster.brokers == {tansu.node_id: Broker(tansu.node_id, tansu.host, tansu.port, None)}
        assert cluster.ready and "reachable" in cluster.status
        assert cluster.api_versions[ApiKey.Produce] == tansu.api_versions[ApiKey.Produce]
        assert cluster.live_broker() == tansu.address
        [change] = changes
        assert change.added == {tansu.node_id} and not change.removed
        advertised = Gateway(cluster, PLAN).api_versions({ApiKey.JoinGroup: (0, 9)})
        assert advertised[ApiKey.JoinGroup] == (0, 9)
        assert advertised[ApiKey.Produce] == tansu.api_versions[ApiKey.Produce]
        # Fetch v16+ would end in node endpoints to rewrite: capped so responses stream.
        assert advertised[ApiKey.Fetch] == (tansu.api_versions[ApiKey.Fetch][0], 15)
        assert ApiKey.OffsetCommit not in advertised  # upstream's group coordinator stays hidden
        # Its topics are known from the first refresh on, even when it has none (yet).
        assert cluster.topics.version >= 1
    finally:
        await cluster.close()


async def test_metadata_points_every_broker_at_kgc_and_lists_kgc(client, tansu):
    response = await client.call(metadata())

    listed = {b.node_id: (b.host, b.port) for b in response.brokers}
    assert listed == {tansu.node_id: ("kgc.test", 30_000 + tansu.node_id),
                      PLAN.coordinator_node_id: ("kgc.test", 9092)}


async def test_api_versions_create_produce_fetch_and_list_offsets_through_the_gateway(client, tansu):
    versions = await client.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    assert versions.error_code == ErrorCode.NONE
    assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys} == tansu.api_versions

    name, topic_id = await created_topic(client)

    produced = await client.call(produce(name, b"one", b"two"))
    [partition] = produced.responses[0].partition_responses
    assert partition.error_code == ErrorCode.NONE

    fetched = await client.call(fetch(topic_id, 0))
    data = fetched.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE
    batches = MemoryRecords(data.records)
    values = []
    while batches.has_next():
        values += [r.value for r in batches.next_batch()]
    assert values == [b"one", b"two"]

    offsets = await client.call(list_offsets(name))
    assert offsets.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert offsets.topics[0].partitions[0].offset == end_offset_at_upstream(tansu, name) > 0


async def test_many_requests_in_flight_are_answered_in_order(client, tansu):
    name, _ = await created_topic(client)
    requests = []
    for i in range(30):
        requests.append(produce(name, b"v%d" % i) if i % 3 else metadata(name))
        requests.append(list_offsets(name))
    futures = [client.send(r) for r in requests]  # all written before any answer is read

    payloads = await asyncio.wait_for(asyncio.gather(*futures), BOUND_S)

    responses = [decode(r, p) for r, p in zip(requests, payloads, strict=True)]  # checks correlation ids
    assert [type(r).__name__ for r in responses] == [type(r).__name__.replace("Request", "Response")
                                                     for r in requests]
    assert responses[-1].topics[0].partitions[0].offset == end_offset_at_upstream(tansu, name) >= 19


async def test_produce_with_acks_0_takes_no_response_and_the_next_response_still_matches(client, tansu):
    name, _ = await created_topic(client)
    await client.call(produce(name, b"first"))

    assert client.send(produce(name, b"fire", b"forget", acks=0)) is None
    offsets = await client.call(list_offsets(name))  # decode() checks the correlation id

    assert offsets.topics[0].partitions[0].offset == end_offset_at_upstream(tansu, name)


async def test_versions_newer_than_kgc_can_rewrite_are_not_forwarded(client):
    request = metadata(version=13)
    request.with_header(correlation_id=1, client_id="t")
    payload = bytearray(request.encode(header=True))
    payload[2:4] = (14).to_bytes(2, "big")  # Metadata v14: a layout kgc does not know yet

    future = client.session.forward(parse_request_header(payload), bytes(payload))

    with pytest.raises(UnforwardableRequest, match="newer than kgc can rewrite"):
        await future


async def test_upstream_killed_fails_in_flight_requests_promptly():
    with TansuBroker() as broker:
        cluster = new_cluster(broker.address)
        cluster.start()
        await asyncio.wait_for(cluster.wait_reachable(), BOUND_S)
        session = GatewaySession(cluster, PLAN, broker.node_id)
        client = SessionClient(session)
        try:
            name, topic_id = await created_topic(client)
            # A long poll on an empty partition: in flight when the broker dies.
            in_flight = client.send(fetch(topic_id, 0, max_wait_ms=10_000))
            await asyncio.sleep(0.1)
            assert not in_flight.done()
            broker.kill()

            with pytest.raises(UpstreamUnavailable):
                await asyncio.wait_for(in_flight, BOUND_S)
            with pytest.raises(UpstreamUnavailable):  # and everything after it
                await asyncio.wait_for(client.send(list_offsets(name)), BOUND_S)
            # well before the 60 s refresh: the dead control connection wakes the loop
            await wait_until(lambda: not cluster.reachable, BOUND_S, "the dead control connection seen")
            assert "unreachable" in cluster.status
        finally:
            await session.close()
            await cluster.close()


async def test_without_upstream_kgc_says_why_keeps_retrying_and_recovers_when_it_starts():
    port = free_port()
    cluster = new_cluster(("127.0.0.1", port))
    cluster.start()
    bootstrap = SessionClient(GatewaySession(cluster, PLAN, None))
    try:
        await wait_until(lambda: cluster.status.startswith("upstream unreachable after 3 attempt(s)"), BOUND_S,
                     "three failed attempts")
        assert not cluster.ready
        assert f"cannot connect to 127.0.0.1:{port}" in cluster.status

        # Metadata is answered here, with a retriable error; anything else fails.
        answer = await bootstrap.call(metadata("orders"))
        assert [b.node_id for b in answer.brokers] == [PLAN.coordinator_node_id]
        assert answer.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        with pytest.raises(UpstreamUnavailable):
            await asyncio.wait_for(bootstrap.send(ApiVersionsRequest[3](client_software_name="t",
                                                                        client_software_version="1")), BOUND_S)

        with TansuBroker(port) as broker:
            fresh = SessionClient(GatewaySession(cluster, PLAN, None))
            try:
                await asyncio.wait_for(cluster.wait_reachable(), BOUND_S)
                assert cluster.ready
                assert set(cluster.brokers) == {broker.node_id}
                answer = await fresh.call(metadata())
                assert {b.node_id for b in answer.brokers} == {broker.node_id, PLAN.coordinator_node_id}
            finally:  # Tansu waits for open connections before it exits
                await fresh.session.close()
                await cluster.close()
    finally:
        await bootstrap.session.close()
        await cluster.close()


async def test_a_session_answered_locally_forwards_again_once_the_upstream_is_back():
    """A client's connection whose Metadata kgc answered itself (no upstream then) stays open,
    so its next Metadata must go upstream when there is one again: kgc in front of a cluster
    that lost a broker otherwise answers that client "no leaders" for good."""
    port = free_port()
    cluster = new_cluster(("127.0.0.1", port))
    cluster.start()
    bootstrap = SessionClient(GatewaySession(cluster, PLAN, None))
    try:
        await wait_until(lambda: "unreachable" in cluster.status, BOUND_S, "a failed attempt")
        answer = await bootstrap.call(metadata("orders"))
        assert [b.node_id for b in answer.brokers] == [PLAN.coordinator_node_id]
        with TansuBroker(port) as broker:
            try:
                await asyncio.wait_for(cluster.wait_reachable(), BOUND_S)
                answer = await bootstrap.call(metadata())
                assert {b.node_id for b in answer.brokers} == {broker.node_id, PLAN.coordinator_node_id}
            finally:  # Tansu waits for open connections before it exits
                await bootstrap.session.close()
                await cluster.close()
    finally:
        await bootstrap.session.close()
        await cluster.close()


async def test_close_stops_the_refresh_loop_even_when_a_wake_up_lands_with_the_cancel():
    # The loop's wait for a wake-up completing in the same step as close()'s cancel: the
    # race a dying upstream causes (its failing connection wakes the loop) when a terminal's
    # Ctrl-C reaches kgc and the embedded broker together. Python 3.11's wait_for then
    # swallows the cancel; close() must still end the loop, within its bound.
    cluster = new_cluster(("127.0.0.1", free_port()), backoff_initial_ms=10_000, backoff_max_ms=10_000)
    cluster.start()
    await wait_until(lambda: "unreachable after 1 attempt" in cluster.status, BOUND_S, "one failed attempt")
    task = cluster._task
    cluster.refresh_soon()
    started = asyncio.get_running_loop().time()
    await cluster.close(timeout_s=BOUND_S)
    assert asyncio.get_running_loop().time() - started < BOUND_S / 2, "close waited out its bound"
    assert task.done()


async def test_wake_ups_cut_the_backoff_short_but_attempts_stay_its_first_step_apart():
    # given an upstream that refuses, retried with a long backoff
    cluster = new_cluster(("127.0.0.1", free_port()), backoff_initial_ms=200, backoff_max_ms=60_000)
    cluster.start()
    try:
        await wait_until(lambda: "unreachable after 1 attempt" in cluster.status, BOUND_S, "one failed attempt")
        # when clients wake the loop all the time for a second (reconnecting, failing forwards)
        loop = asyncio.get_running_loop()
        started = loop.time()
        while loop.time() - started < 1.0:
            cluster.refresh_soon()
            await asyncio.sleep(0.005)
        # then it tried again well before the backoff's doubling alone would (at 0.2, 0.6 s
        # after the first), yet no more often than one attempt per 0.2 s
        assert 4 <= cluster.failed_attempts <= 7, cluster.status
    finally:
        await cluster.close()
