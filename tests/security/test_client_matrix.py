"""Unmodified clients against `kgc serve` (uvloop) with TLS and SASL, in front of Kafka:
confluent-kafka, kafka-python, aiokafka, kafkajs and the Java client each consume and commit
over SASL_SSL with SCRAM-SHA-512 and with PLAIN (kgc checking the passwords), and over mTLS
(the Java client's certificate from a PEM keystore); a wrong password
surfaces as the client's authentication error, and a group or topic alice has no ACL
for as the client's authorization error.

kafkajs (tests/e2e/js/secure.mjs) and sarama 1.61 (tests/e2e/go/sarama_secure) run the SASL_SSL
and mTLS cases too, when Node and Go are on PATH.

Topics are created and records produced on Kafka directly (plaintext): the data is
upstream's; what is under test is the clients' path through kgc (tests/security/test_real_kafka.py
puts kgc in front of a Kafka that wants logins too)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest

from tests.support.admin import create_topic, new_name, produce_sequenced
from tests.support.clients import LIBRARIES, Member, MemberSettings, wait_until
from tests.support.kafkajs import JS_DIR, node  # noqa: F401 (node: a fixture, Node and kafkajs or a skip)
from tests.support.kgc import KGC_GROUP_FLAGS, free_port, kgc_process, wait_listening
from tests.support.sarama import sarama_1_61  # noqa: F401 (a fixture: IBM/sarama's programs or a skip)
from tests.support.security import ClientSecurity, KafkaSocket, TestPki, acl_file, allow, credentials_file

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret"}
# alice may use the groups the matrix makes and read the topics it creates; nothing else.
ACLS = (allow("User:alice", "all", "group", "secure-", "prefixed"), allow("User:alice", "read", "topic", "e2e-", "prefixed"))
RECORDS = 5
CONSUME_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return TestPki(tmp_path_factory.mktemp("pki"))


def _secure_kgc(kafka, directory, *security_flags):
    broker_port = free_port()
    return kgc_process("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                       *KGC_GROUP_FLAGS, *security_flags, log_path=str(directory / "kgc.log")), broker_port


@pytest.fixture(scope="module")
def sasl_ssl_kgc(kafka, pki, tmp_path_factory):
    directory = tmp_path_factory.mktemp("kgc-sasl-ssl")
    users = credentials_file(directory / "users.toml", USERS)
    acl_file(directory / "acls.toml", *ACLS)
    running, broker_port = _secure_kgc(
        kafka, directory, "--security-protocol", "sasl_ssl", "--tls-cert-file", pki.server_cert,
        "--tls-key-file", pki.server_key, "--sasl-credentials-file", users, "--sasl-failure-delay-ms", "0",
        "--authorizer", "file", "--acl-file", str(directory / "acls.toml"))
    with running as proc:
        wait_listening(broker_port)
        yield proc


@pytest.fixture(scope="module")
def mtls_kgc(kafka, pki, tmp_path_factory):
    directory = tmp_path_factory.mktemp("kgc-mtls")
    running, broker_port = _secure_kgc(
        kafka, directory, "--security-protocol", "ssl", "--tls-cert-file", pki.server_cert,
        "--tls-key-file", pki.server_key, "--tls-client-ca-file", pki.ca_file, "--tls-client-auth", "required")
    with running as proc:
        wait_listening(broker_port)
        yield proc


def committed(port: int, group: str, topic: str, context, login=None) -> int:
    with KafkaSocket(port, context=context) as s:
        if login:
            assert login(s).error_code == 0
        request = OffsetFetchRequest[5](group_id=group, topics=[
            OffsetFetchRequest[5].OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        return s.call(request).topics[0].partitions[0].committed_offset


def consume_and_commit(library: str, bootstrap: str, kafka, security: ClientSecurity) -> tuple[str, str]:
    topic = create_topic(kafka.bootstrap, 1)
    produce_sequenced(kafka.bootstrap, topic, 1, RECORDS)
    group = new_name(f"secure-{library}")
    member = Member(library, MemberSettings(bootstrap, group, topic, client_id=group, security=security)).start()
    try:
        wait_until(lambda: len(member.consumed) >= RECORDS, CONSUME_TIMEOUT_S,
                   lambda: f"{library} consumed {len(member.consumed)}", [member])
        member.commit()
    finally:
        member.close()
    return group, topic


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
@pytest.mark.parametrize("library", (*LIBRARIES, "java"))
def test_sasl_ssl_clients_consume_and_commit(sasl_ssl_kgc, kafka, pki, library, mechanism):
    security = ClientSecurity("SASL_SSL", mechanism, "alice", USERS["alice"], ca_file=pki.ca_file)
    group, topic = consume_and_commit(library, sasl_ssl_kgc.bootstrap, kafka, security)
    assert committed(sasl_ssl_kgc.port, group, topic, pki.client_context(),
                     lambda s: s.login_scram("alice", USERS["alice"])) == RECORDS


@pytest.mark.parametrize("library", (*LIBRARIES, "java"))
def test_mtls_clients_consume_and_commit(mtls_kgc, kafka, pki, library):
    cert = pki.issue(f"client-{library}", common_name=library)
    security = ClientSecurity("SSL", ca_file=pki.ca_file, cert_file=cert[0], key_file=cert[1])
    group, topic = consume_and_commit(library, mtls_kgc.bootstrap, kafka, security)
    assert committed(mtls_kgc.port, group, topic, pki.client_context(cert)) == RECORDS


def test_a_wrong_password_is_the_clients_authentication_error(sasl_ssl_kgc, pki):
    from confluent_kafka import Consumer, KafkaError

    errors = []
    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "alice", "wrong", ca_file=pki.ca_file)
    consumer = Consumer({"bootstrap.servers": sasl_ssl_kgc.bootstrap, "group.id": new_name("wrong"),
                         "error_cb": errors.append, **security.confluent()})
    try:
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "invalid credentials" in errors[0].str()


def test_an_unauthorized_group_and_topic_are_the_clients_authorization_errors(sasl_ssl_kgc, kafka, pki):
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    topic = create_topic(kafka.bootstrap, 1)
    produce_sequenced(kafka.bootstrap, topic, 1, 1)
    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "alice", USERS["alice"], ca_file=pki.ca_file)
    outsider = Consumer({"bootstrap.servers": sasl_ssl_kgc.bootstrap, "group.id": new_name("forbidden"),
                         "auto.offset.reset": "earliest", **security.confluent()})
    outsider.subscribe([topic])
    try:
        deadline, error = time.monotonic() + 15, None
        while error is None and time.monotonic() < deadline:
            message = outsider.poll(0.2)
            if message is not None and message.error():
                error = message.error()
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    finally:
        outsider.close()

    member = Consumer({"bootstrap.servers": sasl_ssl_kgc.bootstrap, "group.id": new_name("secure-topics"),
                       **security.confluent()})
    try:
        with pytest.raises(KafkaException) as raised:
            member.commit(offsets=[TopicPartition("payroll", 0, 5)], asynchronous=False)
        assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, raised.value
        [stored] = member.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        assert stored.error is None
    finally:
        member.close()


# What each of kafkajs's and sarama's cases logs in with: a SASL mechanism (over TLS), or none (mTLS).
SECURE_CASES = ("SCRAM-SHA-512", "PLAIN", "mTLS")


def run_secure_consumer(command: list[str], cwd, request, kafka, pki, case: str, name: str) -> None:
    """`command` + [BOOTSTRAP, TOPIC, GROUP, COUNT, SECURITY_JSON] (tests/e2e/js/secure.mjs,
    tests/e2e/go/sarama_secure) consumes and commits through the case's kgc; kgc then holds
    the commit."""
    kgc = request.getfixturevalue("mtls_kgc" if case == "mTLS" else "sasl_ssl_kgc")
    topic = create_topic(kafka.bootstrap, 1)
    produce_sequenced(kafka.bootstrap, topic, 1, RECORDS)
    group = new_name(f"secure-{name}")
    security = {"ca": pki.ca_file}
    login = None
    if case == "mTLS":
        security["cert"], security["key"] = cert = pki.issue(f"client-{name}", common_name=name)
        context = pki.client_context(cert)
    else:
        security.update(mechanism=case, username="alice", password=USERS["alice"])
        context = pki.client_context()
        login = lambda s: s.login_scram("alice", USERS["alice"])   # noqa: E731
    run = subprocess.run([*command, kgc.bootstrap, topic, group, str(RECORDS), json.dumps(security)],
                         cwd=cwd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"consumed": RECORDS}
    assert committed(kgc.port, group, topic, context, login) == RECORDS


@pytest.mark.parametrize("case", SECURE_CASES)
def test_kafkajs_consumes_and_commits(node, request, kafka, pki, case):  # noqa: F811
    run_secure_consumer([node, "secure.mjs"], JS_DIR, request, kafka, pki, case, "kafkajs")


def test_kafkajs_with_a_wrong_password_gets_an_authentication_error(node, sasl_ssl_kgc, pki):  # noqa: F811
    security = {"ca": pki.ca_file, "mechanism": "SCRAM-SHA-512", "username": "alice", "password": "wrong"}
    run = subprocess.run([node, "secure.mjs", sasl_ssl_kgc.bootstrap, "any", new_name("secure-kafkajs"), "1",
                          json.dumps(security)], cwd=JS_DIR, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "KafkaJSSASLAuthenticationError" in run.stderr, run.stderr[-2000:]


@pytest.mark.parametrize("case", SECURE_CASES)
def test_sarama_consumes_and_commits(sarama_1_61, request, kafka, pki, case):  # noqa: F811
    run_secure_consumer([sarama_1_61.program("sarama_secure")], None, request, kafka, pki, case, "sarama")


def test_sarama_with_a_wrong_password_gets_an_authentication_error(sarama_1_61, sasl_ssl_kgc, pki):  # noqa: F811
    security = {"ca": pki.ca_file, "mechanism": "SCRAM-SHA-512", "username": "alice", "password": "wrong"}
    run = subprocess.run([sarama_1_61.program("sarama_secure"), sasl_ssl_kgc.bootstrap, "any",
                          new_name("secure-sarama"), "1", json.dumps(security)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    assert "SASL Authentication failed" in run.stderr, run.stderr[-2000:]


def test_kgc_groups_works_over_sasl_ssl_and_a_wrong_password_is_one_line(sasl_ssl_kgc, kafka, pki):
    import os
    import sys

    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "alice", USERS["alice"], ca_file=pki.ca_file)
    group, topic = consume_and_commit("kafka-python", sasl_ssl_kgc.bootstrap, kafka, security)

    def groups(password: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "coordinator", "groups", "--bootstrap-server", sasl_ssl_kgc.bootstrap,
             "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice",
             "--ssl-cafile", pki.ca_file, *args],
            capture_output=True, text=True, timeout=60, env=dict(os.environ, KGC_SASL_PASSWORD=password))

    described = groups(USERS["alice"], "describe", group)
    assert described.returncode == 0, described.stderr
    [row] = [line.split() for line in described.stdout.splitlines() if line.startswith(group)]
    assert row[1:6] == [topic, "0", str(RECORDS), str(RECORDS), "0"]   # partition, committed, end, lag
    reset = groups(USERS["alice"], "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
    assert reset.returncode == 0, reset.stderr
    assert committed(sasl_ssl_kgc.port, group, topic, pki.client_context(),
                     lambda s: s.login_scram("alice", USERS["alice"])) == 0

    refused = groups("wrong", "list")
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "Traceback" not in refused.stderr and refused.stderr.startswith("kgc groups:")
