"""kgc in front of a real secured Kafka (SASL_SSL, SCRAM-SHA-512 and PLAIN, the StandardAuthorizer
with ACLs: tests/conftest.py `secured_kafka`), where tests/support/secure_front.py stood in.

- passthrough: each client's login is relayed to Kafka, so Kafka's own ACLs judge its data
  (bob, with no ACL on the topic, is refused by Kafka) while kgc judges the group APIs it
  answers with its ACL file, as the same principal;
- terminate: kgc checks the client's login itself and reaches Kafka as its own user.

Each library consumes and commits through kgc in both modes: the Java client, confluent-kafka,
kafka-python, aiokafka, and kafkajs and sarama through the programs of the client matrix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time

import pytest
from confluent_kafka import Producer
from kafka.protocol.producer.transaction import TxnOffsetCommitRequest
from kafka.protocol.sasl import SaslAuthenticateRequest

from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support.admin import new_name
from tests.support.authorization_requests import commit, fetch, join, partition_errors
from tests.support.blocking_socket import pipelined
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kafkajs import JS_DIR, node  # noqa: F401 (node: a fixture, Node and kafkajs or a skip)
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.sarama import sarama_1_61  # noqa: F401 (a fixture: IBM/sarama's programs or a skip)
from tests.support.security import ClientSecurity, KafkaSocket, acl_file, allow, credentials_file

pytestmark = pytest.mark.integration

ACLS = "org.apache.kafka.tools.AclCommand"
RECORDS = 5
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def kafka_acls(secured_kafka):
    """At Kafka: alice reads the topics named secure-*; kgc may do anything with them and
    describe the cluster and its groups; bob has no ACL at all."""
    grant = [
        ("--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
         "--topic", "secure-", "--resource-pattern-type", "prefixed"),
        ("--allow-principal", "User:kgc", "--operation", "All", "--topic", "secure-",
         "--resource-pattern-type", "prefixed"),
        ("--allow-principal", "User:kgc", "--operation", "Describe", "--cluster"),
        ("--allow-principal", "User:kgc", "--operation", "Describe", "--group", "*"),
    ]
    for args in grant:
        secured_kafka.admin_tool(ACLS, "--add", *args)
    return secured_kafka


def topic_with_records(kafka) -> str:
    topic = kafka.create_topic(new_name("secure"))
    producer = Producer({"bootstrap.servers": kafka.bootstrap, **kafka.security.client("admin").confluent()})
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    return topic


@contextlib.asynccontextmanager
async def kgc_in_front(kafka, tmp_path, mode: str):
    pki = kafka.security.pki
    acl_file(tmp_path / "acls.toml", allow("User:alice", "all", "group", "secure-", "prefixed"),
             allow("User:alice", "read", "topic", "*"), allow("User:bob", "all", "group", "secure-", "prefixed"),
             allow("User:bob", "read", "topic", "*"))
    (tmp_path / "kgc-password").write_text(kafka.security.users["kgc"])
    own_logins = ({"sasl_mode": "terminate", "sasl_credentials_file": credentials_file(
        tmp_path / "credentials.toml", {u: kafka.security.users[u] for u in ("alice", "bob")})} if mode == "terminate"
        else {"sasl_mode": "passthrough"})
    config = ServerConfig(
        host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(("127.0.0.1", kafka.port),),
        broker_ports=((kafka.node_id, free_port()),), security_protocol="sasl_ssl",
        tls_cert_file=pki.server_cert, tls_key_file=pki.server_key,
        sasl_mechanisms=("SCRAM-SHA-512", "PLAIN"), upstream_security_protocol="ssl", upstream_tls_ca_file=pki.ca_file,
        upstream_sasl_mechanism="SCRAM-SHA-512", upstream_sasl_username="kgc",
        upstream_sasl_password_file=str(tmp_path / "kgc-password"), authorizer="file",
        acl_file=str(tmp_path / "acls.toml"), **own_logins)
    async with running_kgc(config) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 30)    # kgc's own login at Kafka worked
        yield app


def security(kafka, user: str, mechanism: str = "SCRAM-SHA-512") -> ClientSecurity:
    return ClientSecurity("SASL_SSL", mechanism, user, kafka.security.users[user], ca_file=kafka.security.pki.ca_file)


@pytest.mark.parametrize("mode", ["passthrough", "terminate"])
@pytest.mark.parametrize("library, mechanism", [("confluent-kafka", "SCRAM-SHA-512"), ("java", "SCRAM-SHA-512"),
                                                ("java", "PLAIN"), ("kafka-python", "PLAIN"),
                                                ("aiokafka", "SCRAM-SHA-512")])
async def test_clients_consume_and_commit_through_kgc_in_front_of_secured_kafka(
        kafka_acls, tmp_path, mode, library, mechanism):
    kafka = kafka_acls
    async with kgc_in_front(kafka, tmp_path, mode) as app:
        topic = await asyncio.to_thread(topic_with_records, kafka)
        group = new_name("secure-group")
        member = Member(library, MemberSettings(f"127.0.0.1:{app.port}", group, topic, client_id=group,
                                                security=security(kafka, "alice", mechanism))).start()
        try:
            await asyncio.to_thread(wait_until, lambda: len(member.consumed) >= RECORDS, TIMEOUT_S,
                                    lambda: f"consumed {len(member.consumed)}", [member])
            await asyncio.to_thread(member.commit)
        finally:
            await asyncio.to_thread(member.close)

        assert await asyncio.to_thread(committed_through, app, kafka, group, topic) == RECORDS


def committed_through(app, kafka, group: str, topic: str) -> int:
    """The group's committed offset of the topic's partition 0, as alice reads it through kgc."""
    with KafkaSocket(app.port, context=kafka.security.pki.client_context()) as s:
        assert s.login_scram("alice", kafka.security.users["alice"]).error_code == ErrorCode.NONE
        return s.call(fetch(group, [topic])).topics[0].partitions[0].committed_offset


@pytest.mark.parametrize("mode", ["passthrough", "terminate"])
@pytest.mark.parametrize("client", ["kafkajs", "sarama"])
async def test_kafkajs_and_sarama_consume_and_commit_through_kgc_in_front_of_secured_kafka(
        kafka_acls, tmp_path, request, mode, client):
    # tests/e2e/js/secure.mjs and tests/e2e/go/sarama_secure (IBM/sarama), as in the client
    # matrix, logging in with SCRAM-SHA-512: relayed to Kafka, or checked by kgc.
    kafka = kafka_acls
    if client == "kafkajs":
        command, cwd = [request.getfixturevalue("node"), "secure.mjs"], JS_DIR
    else:
        command, cwd = [request.getfixturevalue("sarama_1_61").program("sarama_secure")], None
    security = {"ca": kafka.security.pki.ca_file, "mechanism": "SCRAM-SHA-512", "username": "alice",
                "password": kafka.security.users["alice"]}
    async with kgc_in_front(kafka, tmp_path, mode) as app:
        topic = await asyncio.to_thread(topic_with_records, kafka)
        group = new_name("secure-group")
        run = await asyncio.to_thread(
            subprocess.run, [*command, f"127.0.0.1:{app.port}", topic, group, str(RECORDS), json.dumps(security)],
            cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert run.returncode == 0, run.stderr[-2000:]
        assert json.loads(run.stdout.strip().splitlines()[-1]) == {"consumed": RECORDS}
        assert await asyncio.to_thread(committed_through, app, kafka, group, topic) == RECORDS


async def test_in_passthrough_kafkas_acls_refuse_a_principal_kgc_lets_into_the_group(kafka_acls, tmp_path):
    """bob may join the group at kgc (kgc's ACL file), but Kafka, which sees bob's own login,
    refuses him the topic's records."""
    kafka = kafka_acls
    async with kgc_in_front(kafka, tmp_path, "passthrough") as app:
        topic = await asyncio.to_thread(topic_with_records, kafka)
        member = Member("java", MemberSettings(f"127.0.0.1:{app.port}", new_name("secure-bob"), topic,
                                               client_id="bob", security=security(kafka, "bob"))).start()
        try:
            await asyncio.to_thread(_wait_failed, member)
            assert "TopicAuthorizationException" in repr(member.error) or "Not authorized" in repr(member.error)
            assert member.consumed == []
        finally:
            if member.running:
                await asyncio.to_thread(member.close)


async def test_a_wrong_password_is_refused_by_kafka_in_passthrough_and_by_kgc_in_terminate(kafka_acls, tmp_path):
    kafka = kafka_acls
    for mode in ("passthrough", "terminate"):
        async with kgc_in_front(kafka, tmp_path, mode) as app:
            def login(mechanism):
                with KafkaSocket(app.port, context=kafka.security.pki.client_context()) as s:
                    answer = (s.login_scram("alice", "wrong") if mechanism == "SCRAM-SHA-512"
                              else s.login_plain("alice", "wrong"))
                    return answer.error_code, s.closed_by_peer()
            for mechanism in ("SCRAM-SHA-512", "PLAIN"):
                assert await asyncio.to_thread(login, mechanism) == (ErrorCode.SASL_AUTHENTICATION_FAILED, True), \
                    (mode, mechanism)


def _wait_failed(member: Member) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while member.error is None:
        assert time.monotonic() < deadline, f"{member.name} was never refused; consumed {len(member.consumed)}"
        time.sleep(0.1)


async def test_in_passthrough_kafkas_refusal_comes_before_the_close_early_frames_are_bounded_and_group_apis_stay(
        kafka_acls, tmp_path):
    """A wrong password with a request pipelined behind it gets Kafka's refusal first; a 64 MiB
    frame announced before any login is closed at its header; a TxnOffsetCommit is kgc's to
    authorize (alice may not write transactional id "tx"), never Kafka's (issue 28's gaps,
    before real Kafka)."""
    kafka = kafka_acls
    async with kgc_in_front(kafka, tmp_path, "passthrough") as app:
        context = kafka.security.pki.client_context()

        def scenario():
            with KafkaSocket(app.port, context=context) as s:
                assert s.handshake("PLAIN").error_code == ErrorCode.NONE
                wrong = SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0wrong")
                pipelined(s, wrong, join("secure-victim"))
                assert s.receive(wrong).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=context) as s:
                s.send_until_closed((64 * 2**20).to_bytes(4, "big") + b"\0" * 65_536)    # before any login
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=context) as s:
                assert s.login_plain("alice", kafka.security.users["alice"]).error_code == ErrorCode.NONE
                cls = TxnOffsetCommitRequest[3]
                topic = cls.TxnOffsetCommitRequestTopic
                commit = cls(transactional_id="tx", group_id="secure-group", producer_id=1, producer_epoch=0,
                             generation_id=-1, member_id="", group_instance_id=None, topics=[
                                 topic(name="secure-payments", partitions=[topic.TxnOffsetCommitRequestPartition(
                                     partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                                     committed_metadata="")])])
                refused = s.call(commit)
                assert refused.topics[0].partitions[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

        await asyncio.to_thread(scenario)


async def test_a_topic_hidden_from_kgc_keeps_its_offsets_where_a_deleted_one_loses_them(kafka_acls, tmp_path, caplog):
    """kgc learns a deletion when a topic goes from its reads of the upstream's topics. A topic
    kgc may no longer describe goes from them too, but it is not deleted: asked by name,
    Kafka answers TOPIC_AUTHORIZATION_FAILED, and its offsets stay, and so do its commits."""
    kafka = kafka_acls
    hidden, doomed = kafka.create_topic(new_name("hidden")), kafka.create_topic(new_name("secure"))
    may_describe = ("--allow-principal", "User:kgc", "--operation", "Describe", "--topic", hidden)
    kafka.admin_tool(ACLS, "--add", *may_describe)
    group = new_name("secure-group")
    async with kgc_in_front(kafka, tmp_path, "terminate") as app:
        def call(request):
            with KafkaSocket(app.port, context=kafka.security.pki.client_context()) as s:
                assert s.login_scram("alice", kafka.security.users["alice"]).error_code == ErrorCode.NONE
                return s.call(request)

        def offsets() -> dict[str, int]:
            return {t.name: t.partitions[0].committed_offset for t in call(fetch(group, [hidden, doomed])).topics}

        assert partition_errors(await asyncio.to_thread(call, commit(group, {hidden: 3, doomed: 4}))) == {
            hidden: ErrorCode.NONE, doomed: ErrorCode.NONE}
        await asyncio.to_thread(wait_until, lambda: {hidden, doomed} <= app.cluster.topics.by_name.keys(),
                                TIMEOUT_S, lambda: f"kgc's topics: {sorted(app.cluster.topics.by_name)}")
        await asyncio.to_thread(kafka.admin_tool, ACLS, "--remove", "--force", *may_describe)
        await asyncio.to_thread(kafka.admin_tool, "org.apache.kafka.tools.TopicCommand", "--delete", "--topic", doomed)
        await asyncio.to_thread(wait_until, lambda: not {hidden, doomed} & app.cluster.topics.by_name.keys(),
                                TIMEOUT_S, lambda: f"kgc's topics: {sorted(app.cluster.topics.by_name)}")
        await asyncio.to_thread(wait_until, lambda: offsets()[doomed] == -1, TIMEOUT_S, lambda: f"{offsets()}")
        assert await asyncio.to_thread(offsets) == {hidden: 3, doomed: -1}
        assert f"upstream topics ['{hidden}'] left kgc's view but are not deleted" in caplog.text
        # A commit naming both: the deleted topic is refused, as Kafka refuses it; the hidden
        # one, which kgc cannot tell from a missing one, is committed.
        assert partition_errors(await asyncio.to_thread(call, commit(group, {hidden: 5, doomed: 6}))) == {
            hidden: ErrorCode.NONE, doomed: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert await asyncio.to_thread(offsets) == {hidden: 5, doomed: -1}
