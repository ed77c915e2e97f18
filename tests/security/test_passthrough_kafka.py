"""Issue 28's four gaps, rerun with kgc in passthrough in front of a real secured Apache
Kafka (SASL_SSL, SCRAM-SHA-512 and PLAIN, the StandardAuthorizer): the cluster checks the
passwords, kgc relays its refusals, bounds what comes before the login, and keeps the
group APIs it does not serve away from it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from kafka.protocol.producer.transaction import TxnOffsetCommitRequest
from kafka.protocol.sasl import SaslAuthenticateRequest

from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.security.test_authorization import join
from tests.security.test_sasl_terminate import pipelined
from tests.support.kafka import KafkaCluster, KafkaSecurity
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.security import KafkaSocket, TestPki

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

USERS = {"admin": "admin-secret", "kgc": "kgc-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory):
    pki = TestPki(tmp_path_factory.mktemp("pki"))
    security = KafkaSecurity(pki, USERS, super_users=("admin", "kgc"))
    with KafkaCluster(tmp_path_factory.mktemp("secured-kafka"), security=security) as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def passthrough_kgc(cluster, tmp_path):
    pki = cluster.security.pki
    (tmp_path / "kgc-password").write_text(USERS["kgc"])
    config = ServerConfig(
        host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=((cluster.host, cluster.port),),
        broker_ports=((cluster.node_id, free_port()),), security_protocol="sasl_ssl",
        tls_cert_file=pki.server_cert, tls_key_file=pki.server_key, sasl_mode="passthrough",
        sasl_mechanisms=("SCRAM-SHA-512", "PLAIN"), upstream_security_protocol="ssl",
        upstream_tls_ca_file=pki.ca_file, upstream_sasl_mechanism="SCRAM-SHA-512", upstream_sasl_username="kgc",
        upstream_sasl_password_file=str(tmp_path / "kgc-password"))
    async with running_kgc(config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 30)
        yield app


async def test_kafkas_refusal_is_relayed_before_the_close_and_early_frames_are_bounded(secured_kafka, tmp_path):
    async with passthrough_kgc(secured_kafka, tmp_path) as app:
        context = secured_kafka.security.pki.client_context()

        def scenario():
            with KafkaSocket(app.port, context=context) as s:
                assert s.handshake("PLAIN").error_code == ErrorCode.NONE
                wrong = SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0wrong")
                pipelined(s, wrong, join("alice-victim"))
                assert s.receive(wrong).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=context) as s:
                s.sock.sendall((64 * 2**20).to_bytes(4, "big") + b"\0" * 65_536)    # before any login
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=context) as s:
                assert s.login_plain("alice", USERS["alice"]).error_code == ErrorCode.NONE
                cls = TxnOffsetCommitRequest[3]
                topic = cls.TxnOffsetCommitRequestTopic
                commit = cls(transactional_id="tx", group_id="alice-group", producer_id=1, producer_epoch=0,
                             generation_id=-1, member_id="", group_instance_id=None, topics=[
                                 topic(name="payments", partitions=[topic.TxnOffsetCommitRequestPartition(
                                     partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                                     committed_metadata="")])])
                refused = s.call(commit)
                assert refused.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION

        await asyncio.to_thread(scenario)
