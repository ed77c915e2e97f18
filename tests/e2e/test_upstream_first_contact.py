"""A client that connects to kgc before kgc has reached its upstream (kgc just started, or
restarted after kill -9, while clients reconnect within milliseconds).

ApiVersions is the first thing a client asks, and it keeps the answer for its connection's
life. kgc's own ranges alone would tell it that Produce, Fetch or InitProducerId do not
exist there: librdkafka's transactional producer then fails fatally ("Transactions not
supported by any of the 1 connected broker(s)"). So the answer waits for the upstream's
ranges, within a bound, and with none the connection closes for the client to ask again.
The upstream here is the session's real Kafka broker behind a relay that starts listening
when the test says."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from coordinator.probe import read_exactly, request_response
from coordinator.settings import ServerConfig
from tests.support.admin import create_topic
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.ports import free_port
from tests.support.tls_relay import TlsRelay
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

# Forwarded APIs a producer or consumer needs from its first connection on.
FORWARDED = {ApiKey.Produce, ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.InitProducerId, ApiKey.AddPartitionsToTxn,
             ApiKey.EndTxn}
BOUND_S = 30


def kgc_config(kafka, upstream_port: int) -> ServerConfig:
    return ServerConfig(host="127.0.0.1", port=0, upstream=(("127.0.0.1", upstream_port),),
                        broker_ports=tuple((node.node_id, free_port()) for node in kafka.nodes), group=TEST_GROUP_CONFIG)


def api_versions(port: int, timeout_s: float = BOUND_S) -> set[int]:
    answer = request_response(("127.0.0.1", port), ApiVersionsRequest[3](
        client_software_name="kgc-test", client_software_version="1"), ApiVersionsResponse, timeout_s=timeout_s)
    assert answer.error_code == 0
    return {key.api_key for key in answer.api_keys}


async def test_api_versions_asked_before_kgc_reaches_its_upstream_waits_for_the_upstreams_apis(kafka):
    # given kgc started while its upstream does not answer yet
    relay = TlsRelay(None, free_port())
    async with running_kgc(kgc_config(kafka, relay.port)) as app:
        try:
            # when a client asks ApiVersions then, and the upstream answers a moment later
            asked = asyncio.ensure_future(asyncio.to_thread(api_versions, app.port))
            await asyncio.sleep(0.5)
            assert not app.cluster.api_versions
            await relay.start((kafka.host, kafka.port))
            # then the answer lists what the client will send through kgc, not kgc's own APIs alone
            served = await asyncio.wait_for(asked, BOUND_S)
            assert FORWARDED <= served, sorted(FORWARDED - served)
            assert {ApiKey.JoinGroup, ApiKey.OffsetCommit, ApiKey.ConsumerGroupHeartbeat} <= served
        finally:
            await relay.close()


async def test_api_versions_with_the_upstream_still_unreachable_closes_the_connection_then_answers_once_reached(kafka):
    # given kgc whose upstream does not answer, with a short connection bound
    relay = TlsRelay(None, free_port())
    async with running_kgc(kgc_config(kafka, relay.port)) as app:
        try:
            app.cluster.connect_timeout_ms = 300
            # when a client asks ApiVersions
            with socket.create_connection(("127.0.0.1", app.port), timeout=BOUND_S) as sock:
                request = ApiVersionsRequest[3](client_software_name="kgc-test", client_software_version="1")
                request.with_header(correlation_id=1, client_id="kgc-test")
                sock.sendall(request.encode(header=True, framed=True))
                # then kgc closes the connection rather than answer with its own APIs alone
                with pytest.raises(ConnectionError):
                    await asyncio.to_thread(read_exactly, sock, 4)
            # and once kgc's retries have backed off beyond that bound (the next attempt a
            # second or more away), a client asking again as the upstream answers is told the
            # upstream's APIs: its waiting asks for an attempt now
            await wait_until(lambda: app.cluster.failed_attempts >= 5, BOUND_S, "five failed attempts")
            await relay.start((kafka.host, kafka.port))
            served = await asyncio.to_thread(api_versions, app.port)
            assert FORWARDED <= served, sorted(FORWARDED - served)
        finally:
            await relay.close()


async def test_a_transactional_producer_started_before_kgc_reaches_its_upstream_commits_once_it_does(kafka):
    from confluent_kafka import Producer

    topic = create_topic(kafka.bootstrap, 1)
    relay = TlsRelay(None, free_port())
    async with running_kgc(kgc_config(kafka, relay.port)) as app:
        try:
            # given a transactional producer (librdkafka) whose first connections reach kgc before its upstream
            producer = Producer({"bootstrap.servers": f"127.0.0.1:{app.port}",
                                 "transactional.id": f"first-contact-{uuid.uuid4()}"})

            def one_transaction() -> None:
                producer.init_transactions(BOUND_S)
                producer.begin_transaction()
                producer.produce(topic, b"once")
                producer.commit_transaction(BOUND_S)

            done = asyncio.ensure_future(asyncio.to_thread(one_transaction))
            await asyncio.sleep(1.0)
            # when the upstream answers
            await relay.start((kafka.host, kafka.port))
            # then its transaction commits: no fatal "transactions not supported"
            await asyncio.wait_for(done, BOUND_S + 5)
        finally:
            await relay.close()
