"""SASL passthrough: kgc relays each client's SASL exchange on the client's own upstream
connection to a secured broker (tests/support/secure_front.py: TLS + SASL in front of
Tansu), reads the principal, and authorizes the group APIs it answers as that principal;
kgc logs in to the broker itself (SCRAM) for its control connection. OAUTHBEARER tokens
are unsecured JWTs the front validates as Kafka's default unsecured validator does."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest

from coordinator.net.passthrough import plain_user, scram_user
from coordinator.settings import ConfigError, ServerConfig, load_config
from protocol.errors import ErrorCode
from tests.support.admin import new_name
from tests.support.auth_metrics import auth_count
from tests.support.authorization_requests import commit, fetch, join, partition_errors
from tests.support.blocking_socket import pipelined
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.secure_front import SecureFront
from tests.support.security import ClientSecurity, KafkaSocket, acl_file, allow, unsecured_jwt
from tests.support.tansu_topics import created_topic, topic_with_records

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret", "kgc": "kgc-secret"}
ACLS = (allow("User:alice", "all", "group", "secure-", "prefixed"), allow("User:alice", "read", "topic", "*"))


@contextlib.asynccontextmanager
async def passthrough(pki, broker, port, tmp_path, kgc_settings=None, oauth_claim="sub", **front_options):
    front = await SecureFront(pki.server_context(), port, USERS, **front_options).start(broker.address)
    acl_file(tmp_path / "acls.toml", *ACLS)
    (tmp_path / "kgc-password").write_text(USERS["kgc"])
    config = ServerConfig(
        host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(("127.0.0.1", port),),
        broker_ports=((broker.node_id, free_port()),), security_protocol="sasl_ssl",
        tls_cert_file=pki.server_cert, tls_key_file=pki.server_key, sasl_mode="passthrough",
        sasl_mechanisms=("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER"),
        sasl_oauthbearer_sub_claim_name=oauth_claim,
        upstream_security_protocol="ssl", upstream_tls_ca_file=pki.ca_file, upstream_sasl_mechanism="SCRAM-SHA-512",
        upstream_sasl_username="kgc", upstream_sasl_password_file=str(tmp_path / "kgc-password"),
        **(kgc_settings or {"authorizer": "file", "acl_file": str(tmp_path / "acls.toml")}))
    try:
        async with running_kgc(config) as app:
            await asyncio.wait_for(app.cluster.wait_reachable(), 10)    # kgc's own login worked
            yield app, front
    finally:
        await front.close()


@pytest.mark.parametrize("library, mechanism", [("confluent-kafka", "SCRAM-SHA-512"), ("confluent-kafka", "PLAIN"),
                                                ("confluent-kafka", "OAUTHBEARER"),
                                                ("kafka-python", "SCRAM-SHA-512"), ("aiokafka", "SCRAM-SHA-256")])
async def test_clients_consume_and_commit_as_themselves(secured_tansu, front_port, pki, tmp_path, library,
                                                        mechanism):
    async with passthrough(pki, secured_tansu, front_port, tmp_path) as (app, front):
        topic = await asyncio.to_thread(topic_with_records, secured_tansu, 5)
        group = new_name("secure-pass")
        security = ClientSecurity("SASL_SSL", mechanism, "alice", USERS["alice"], ca_file=pki.ca_file)
        member = Member(library, MemberSettings(f"127.0.0.1:{app.port}", group, topic, client_id=group,
                                                security=security)).start()
        try:
            await asyncio.to_thread(wait_until, lambda: len(member.consumed) >= 5, 30,
                                    lambda: f"consumed {len(member.consumed)}", [member])
            await asyncio.to_thread(member.commit)
        finally:
            await asyncio.to_thread(member.close)
        assert "User:alice" in front.logins           # the broker saw alice, not kgc

        def committed():
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                assert s.login_scram("alice", USERS["alice"]).error_code == ErrorCode.NONE
                return s.call(fetch(group, [topic])).topics[0].partitions[0].committed_offset
        assert await asyncio.to_thread(committed) == 5


async def test_the_broker_refuses_a_wrong_password_and_kgc_closes(secured_tansu, front_port, pki, tmp_path):
    async with passthrough(pki, secured_tansu, front_port, tmp_path) as (app, front):
        def scenario():
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                refused = s.login_scram("alice", "wrong")
                assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                s.send(join("secure-victim", "v-1"))           # no SASL at all
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                # A wrong password with a request right behind it: the broker's refusal is
                # relayed first, then kgc closes, as Kafka does.
                assert s.handshake("PLAIN").error_code == ErrorCode.NONE
                wrong = SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0wrong")
                pipelined(s, wrong, join("secure-victim", "v-1"))
                assert s.receive(wrong).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                assert s.login_plain("alice", USERS["alice"]).error_code == ErrorCode.NONE
                return s.call(ListGroupsRequest[4](states_filter=[])).groups

        assert await asyncio.to_thread(scenario) == []
        assert front.logins.count("User:alice") == 1


async def test_success_without_a_server_proof_is_refused(secured_tansu, front_port, pki, tmp_path):
    async with passthrough(pki, secured_tansu, front_port, tmp_path, scram_failure_as_success=True) as (app, front):
        def scenario():
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                answer = s.login_scram("alice", "wrong")       # the broker says 0 with e=
                assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()

        await asyncio.to_thread(scenario)
        assert set(front.logins) == {"User:kgc"}           # kgc may log in more than once


async def test_the_brokers_session_lifetime_binds_requests_kgc_answers(secured_tansu, front_port, pki, tmp_path):
    topic = await asyncio.to_thread(created_topic, secured_tansu)
    async with passthrough(pki, secured_tansu, front_port, tmp_path, session_lifetime_ms=600) as (app, front):
        def scenario():
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                ok = s.login_scram("alice", USERS["alice"])
                assert (ok.error_code, ok.session_lifetime_ms) == (ErrorCode.NONE, 600)
                assert partition_errors(s.call(commit("secure-g", {topic: 1}))) == {topic: ErrorCode.NONE}
                again = s.login_scram("alice", USERS["alice"])   # KIP-368, relayed
                assert again.error_code == ErrorCode.NONE
                time.sleep(0.7)
                s.send(commit("secure-g", {topic: 2}))             # kgc's own API, after expiry
                assert s.closed_by_peer()

        await asyncio.to_thread(scenario)


def token(**claims) -> str:
    return unsecured_jwt({"exp": time.time() + 600, **claims})


async def test_oauthbearer_principal_is_the_tokens_claim_and_kgcs_acls_apply_to_it(secured_tansu, front_port, pki,
                                                                                   tmp_path):
    successes = auth_count("OAUTHBEARER", "success")
    topic = await asyncio.to_thread(created_topic, secured_tansu)
    async with passthrough(pki, secured_tansu, front_port, tmp_path) as (app, front):
        def commit_as(jwt: str) -> int:
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                assert s.login_oauthbearer(jwt).error_code == ErrorCode.NONE
                return partition_errors(s.call(commit("secure-oauth", {topic: 1})))[topic]

        assert await asyncio.to_thread(commit_as, token(sub="alice")) == ErrorCode.NONE
        assert await asyncio.to_thread(commit_as, token(sub="bob")) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert [p for p in front.logins if p != "User:kgc"] == ["User:alice", "User:bob"]
        assert auth_count("OAUTHBEARER", "success") == successes + 2


@pytest.mark.parametrize("failure_as_success", [False, True])     # True: the broker says 0 after refusing
async def test_oauthbearer_tokens_the_broker_refuses_fail_the_client(secured_tansu, front_port, pki, tmp_path,
                                                                     failure_as_success):
    failures = auth_count("OAUTHBEARER", "failure")
    async with passthrough(pki, secured_tansu, front_port, tmp_path,
                           oauth_failure_as_success=failure_as_success) as (app, front):
        def refused(jwt: str) -> int:
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                answer = s.login_oauthbearer(jwt)          # error JSON, acknowledged, then the failure
                assert s.closed_by_peer()
                return answer.error_code

        expired = unsecured_jwt({"sub": "alice", "exp": time.time() - 60})
        signed = unsecured_jwt({"sub": "alice", "exp": time.time() + 600}, {"alg": "RS256"})
        assert await asyncio.to_thread(refused, expired) == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert await asyncio.to_thread(refused, signed) == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert set(front.logins) == {"User:kgc"}
        assert auth_count("OAUTHBEARER", "failure") == failures + 2


async def test_oauthbearer_uses_the_configured_claim_and_refuses_tokens_without_it(secured_tansu, front_port, pki,
                                                                                   tmp_path):
    failures = auth_count("OAUTHBEARER", "failure")
    topic = await asyncio.to_thread(created_topic, secured_tansu)
    async with passthrough(pki, secured_tansu, front_port, tmp_path, oauth_claim="upn") as (app, front):
        def scenario():
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                answer = s.login_oauthbearer(token(sub="alice"))     # the broker would take it: kgc cannot
                assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert "no 'upn' claim" in answer.error_message
                assert s.closed_by_peer()
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                assert s.login_oauthbearer(token(sub="mallory", upn="alice")).error_code == ErrorCode.NONE
                return partition_errors(s.call(commit("secure-upn", {topic: 1})))[topic]

        assert await asyncio.to_thread(scenario) == ErrorCode.NONE    # kgc's principal: User:alice
        assert set(front.logins) == {"User:kgc", "User:mallory"}      # the broker's: its own claim
        assert auth_count("OAUTHBEARER", "failure") == failures + 1


@pytest.mark.parametrize("token, user", [
    (b"n,,n=alice,r=abc", "alice"), (b"n,a=alice,n=alice,r=abc", "alice"), (b"n,,n=a=2Cb=3Dc,r=x", "a,b=c"),
    (b"n,a=bob,n=alice,r=abc", None),          # authzid other than the user: Kafka refuses
    (b"y,,n=alice,r=abc", None), (b"p=tls-unique,,n=alice,r=abc", None),   # channel binding
    (b"n,,n=alice,r=abc,tokenauth=true", None),   # delegation token: the principal is not the name
    (b"n,,r=abc", None), (b"\xff", None),
])
def test_the_scram_user_is_read_as_kafka_reads_it(token, user):
    assert scram_user(token) == user


def test_plain_users_and_the_settings_passthrough_needs():
    assert plain_user(b"\0alice\0pw") == "alice" and plain_user(b"alice\0alice\0pw") == "alice"
    assert plain_user(b"bob\0alice\0pw") is None and plain_user(b"\0alice\0") is None
    base = {"security_protocol": "sasl_plaintext", "sasl_mode": "passthrough"}
    with pytest.raises(ConfigError, match="needs an upstream"):
        load_config(base, {})
    with pytest.raises(ConfigError, match="upstream_security_protocol"):
        load_config({**base, "upstream": "k:9093"}, {})
    assert load_config({**base, "upstream": "k:9093", "sasl_passthrough_insecure_upstream": "true"}, {}).config.sasl
    with pytest.raises(ConfigError, match="go together"):
        load_config({"upstream": "k:9093", "upstream_sasl_mechanism": "PLAIN"}, {})


def test_passthrough_is_the_default_when_the_upstream_uses_sasl(tmp_path):
    password = tmp_path / "kgc.password"
    password.write_text("secret")
    login = {"upstream_sasl_mechanism": "SCRAM-SHA-512", "upstream_sasl_username": "kgc",
             "upstream_sasl_password_file": str(password)}
    sasl_upstream = load_config({**login, "upstream": "k:9093"}, {})
    assert sasl_upstream.config.sasl_mode == "passthrough"
    assert "upstream uses SASL" in sasl_upstream.sources["sasl_mode"]
    assert load_config({"upstream": "k:9093"}, {}).config.sasl_mode == "terminate"
    chosen = load_config({**login, "upstream": "k:9093"}, {"KGC_SASL_MODE": "terminate"})
    assert chosen.config.sasl_mode == "terminate" and chosen.sources["sasl_mode"] == "environment KGC_SASL_MODE"


GROUP, TOPIC, LITERAL, PREFIXED, ALL, READ, ALLOW = 3, 2, 3, 4, 2, 3, 3


async def test_group_apis_follow_the_upstreams_own_acls(secured_tansu, front_port, pki, tmp_path):
    settings = {"authorizer": "upstream", "acl_refresh_interval_ms": 100}
    topic = await asyncio.to_thread(created_topic, secured_tansu)
    async with passthrough(pki, secured_tansu, front_port, tmp_path, settings) as (app, front):
        front.acls[:] = [(GROUP, "secure-", PREFIXED, "User:alice", "*", ALL, ALLOW),
                         (TOPIC, "*", LITERAL, "User:alice", "*", READ, ALLOW)]
        await app.upstream_acls.refresh()

        def commit_as_alice(group: str) -> int:
            with KafkaSocket(app.port, context=pki.client_context()) as s:
                assert s.login_scram("alice", USERS["alice"]).error_code == ErrorCode.NONE
                return partition_errors(s.call(commit(group, {topic: 1})))[topic]

        assert await asyncio.to_thread(commit_as_alice, "secure-g") == ErrorCode.NONE
        assert await asyncio.to_thread(commit_as_alice, "payroll") == ErrorCode.GROUP_AUTHORIZATION_FAILED
        front.acls.append((GROUP, "payroll", LITERAL, "User:alice", "*", READ, ALLOW))   # granted upstream
        await asyncio.sleep(0.5)                                                       # a few refreshes
        assert await asyncio.to_thread(commit_as_alice, "payroll") == ErrorCode.NONE
        assert app.upstream_acls.status == "3 upstream ACL bindings"

        front.acls = None                                         # a cluster without an authorizer
        await app.upstream_acls.refresh()
        assert await asyncio.to_thread(commit_as_alice, "anything") == ErrorCode.NONE
