"""SASL terminate in front of a cluster that authenticates every connection: kgc checks the
clients' passwords itself and opens every upstream connection as its own user, the ones
carrying clients' requests included (kgc logs in on them before writing any client frame).
The cluster is Tansu behind the test front (tests/support/secure_front.py: TLS + SCRAM)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import MetadataRequest

from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support.admin import new_name
from tests.support.authorization_requests import fetch
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.secure_front import SecureFront
from tests.support.security import ClientSecurity, KafkaSocket, credentials_file
from tests.support.tansu_topics import topic_with_records

pytestmark = pytest.mark.integration

CLIENTS = {"alice": "alice-secret"}            # kgc's users (its credentials file)
BROKER_USERS = {"kgc": "kgc-secret"}           # the cluster's: kgc alone


@contextlib.asynccontextmanager
async def terminate_in_front_of_secure_cluster(pki, broker, port, tmp_path):
    front = await SecureFront(pki.server_context(), port, BROKER_USERS).start(broker.address)
    (tmp_path / "kgc-password").write_text(BROKER_USERS["kgc"])
    config = ServerConfig(
        host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(("127.0.0.1", port),),
        broker_ports=((broker.node_id, free_port()),), security_protocol="sasl_plaintext", sasl_mode="terminate",
        sasl_mechanisms=("SCRAM-SHA-512", "PLAIN"), sasl_failure_delay_ms=0,
        sasl_credentials_file=credentials_file(tmp_path / "users.toml", CLIENTS),
        upstream_security_protocol="ssl", upstream_tls_ca_file=pki.ca_file, upstream_sasl_mechanism="SCRAM-SHA-512",
        upstream_sasl_username="kgc", upstream_sasl_password_file=str(tmp_path / "kgc-password"))
    try:
        async with running_kgc(config) as app:
            await asyncio.wait_for(app.cluster.wait_reachable(), 10)
            yield app, front
    finally:
        await front.close()


def produce_through(port: int, topic: str, count: int, security: ClientSecurity) -> list:
    errors: list = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "message.timeout.ms": 20_000,
                         **security.confluent()})
    for i in range(count):
        producer.produce(topic, b"through-%d" % i, partition=0,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
    assert producer.flush(25) == 0, "records still queued"
    return errors


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
async def test_clients_produce_consume_and_commit_through_kgcs_own_login(secured_tansu, front_port, pki,
                                                                        tmp_path, mechanism):
    async with terminate_in_front_of_secure_cluster(pki, secured_tansu, front_port, tmp_path) as (app, front):
        topic = await asyncio.to_thread(topic_with_records, secured_tansu, 3)
        security = ClientSecurity("SASL_PLAINTEXT", mechanism, "alice", CLIENTS["alice"])
        assert await asyncio.to_thread(produce_through, app.port, topic, 4, security) == []
        group = new_name("terminate-up")
        member = Member("confluent-kafka", MemberSettings(f"127.0.0.1:{app.port}", group, topic, client_id=group,
                                                          security=security)).start()
        try:
            await asyncio.to_thread(wait_until, lambda: len(member.consumed) >= 7, 30,
                                    lambda: f"consumed {len(member.consumed)}", [member])
            await asyncio.to_thread(member.commit)
        finally:
            await asyncio.to_thread(member.close)
        assert {c.value for c in member.consumed} >= {b"through-%d" % i for i in range(4)}
        assert set(front.logins) == {"User:kgc"}        # the cluster never saw alice
        # Control connection, bootstrap and broker forwarding connections of two clients at least.
        assert len(front.logins) >= 4

        def committed():
            with KafkaSocket(app.port) as s:
                assert s.login_scram("alice", CLIENTS["alice"]).error_code == ErrorCode.NONE
                return s.call(fetch(group, [topic])).topics[0].partitions[0].committed_offset
        assert await asyncio.to_thread(committed) == 7


async def test_a_refused_upstream_login_closes_the_client_and_says_why(secured_tansu, front_port, pki, tmp_path,
                                                                     caplog):
    async with terminate_in_front_of_secure_cluster(pki, secured_tansu, front_port, tmp_path) as (app, front):
        logins = len(front.logins)
        front.set_password("kgc", "rotated-on-the-broker")     # kgc's control connection stays logged in

        def client():
            with KafkaSocket(app.port) as s:
                assert s.login_scram("alice", CLIENTS["alice"]).error_code == ErrorCode.NONE
                s.send(MetadataRequest[1](topics=None))            # forwarded: kgc must log in upstream
                return s.closed_by_peer()

        with caplog.at_level(logging.INFO):
            assert await asyncio.to_thread(client)
        refused = [r.getMessage() for r in caplog.records if "kgc's login at" in r.getMessage()]
        assert refused and "refused kgc's login as kgc" in refused[0], refused
        assert not any(BROKER_USERS["kgc"] in r.getMessage() or "rotated-on-the-broker" in r.getMessage()
                       for r in caplog.records)
        assert len(front.logins) == logins                    # no login succeeded after the change
