"""kgc checking SASL credentials itself (`sasl_mode = "terminate"`), request by request:
the barrier before authentication, each mechanism, failures, KIP-368 session lifetime
and re-authentication, and the credential file reloaded while kgc runs."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest

from protocol.errors import ErrorCode
from tests.support.blocking_socket import in_thread, pipelined
from tests.support.sasl_terminate import PASSWORDS, sasl_kgc
from tests.support.security import KafkaSocket, credentials_file


def join(group: str, version: int = 3) -> JoinGroupRequest:
    return JoinGroupRequest[version](group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                     member_id="", group_instance_id=None, protocol_type="consumer",
                                     protocols=[JoinGroupRequest[version].JoinGroupRequestProtocol(
                                         name="range", metadata=b"")])


async def test_before_authentication_only_api_versions_and_sasl_are_read(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def outsider():
            with KafkaSocket(app.port) as s:
                versions = s.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
                ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
                assert ranges[17] == (1, 1) and ranges[36] == (0, 2)
                s.send(join("victim"))
                assert s.closed_by_peer()

        def insider():
            with KafkaSocket(app.port) as s:
                assert s.login_scram("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
                return s.call(ListGroupsRequest[4](states_filter=[])).groups

        await in_thread(outsider)
        assert await in_thread(insider) == []       # the outsider's JoinGroup created nothing


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
async def test_each_mechanism_accepts_the_password_and_refuses_others(tmp_path, mechanism):
    async with sasl_kgc(tmp_path) as app:
        def login(user: str, password: str):
            s = KafkaSocket(app.port)
            if mechanism == "PLAIN":
                return s, s.login_plain(user, password)
            return s, s.login_scram(user, password, mechanism)

        def scenario():
            s, ok = login("alice", PASSWORDS["alice"])
            with s:
                assert (ok.error_code, ok.session_lifetime_ms) == (ErrorCode.NONE, 0)
                assert s.call(join("alice-group")).error_code == ErrorCode.NONE
            messages = set()
            for user, password in (("alice", "wrong"), ("nobody", "whatever")):
                s, refused = login(user, password)
                with s:
                    assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                    assert s.closed_by_peer()
                    messages.add(refused.error_message)
            assert len(messages) == 1 and "nobody" not in messages.pop()   # who exists is not told

        await in_thread(scenario)


async def test_a_refused_password_is_answered_before_the_close_even_with_a_request_behind_it(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                assert s.handshake("PLAIN").error_code == ErrorCode.NONE
                wrong = SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0wrong")
                pipelined(s, wrong, join("victim"))
                assert s.receive(wrong).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()          # and the JoinGroup behind it was never served

        await in_thread(scenario)
        assert await in_thread(lambda: _groups(app)) == []


async def test_a_request_pipelined_behind_an_accepted_password_is_served_after_it(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                assert s.handshake("PLAIN").error_code == ErrorCode.NONE
                right = SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0" + PASSWORDS["alice"].encode())
                listing = ListGroupsRequest[4](states_filter=[])
                pipelined(s, right, listing)
                assert s.receive(right).error_code == ErrorCode.NONE
                assert s.receive(listing).error_code == ErrorCode.NONE

        await in_thread(scenario)


def _groups(app) -> list:
    with KafkaSocket(app.port) as s:
        assert s.login_plain("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
        return s.call(ListGroupsRequest[4](states_filter=[])).groups


async def test_unknown_mechanism_and_out_of_order_authenticate_close(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                refused = s.handshake("GSSAPI")
                assert refused.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
                assert refused.mechanisms == ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
                assert s.closed_by_peer()
            with KafkaSocket(app.port) as s:
                early = s.call(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0alice-secret"))
                assert early.error_code == ErrorCode.ILLEGAL_SASL_STATE
                assert s.closed_by_peer()

        await in_thread(scenario)


async def test_an_expired_session_is_closed_even_if_it_only_heartbeats(tmp_path):
    async with sasl_kgc(tmp_path, sasl_max_reauth_ms=400) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                ok = s.login_scram("alice", PASSWORDS["alice"])
                assert (ok.error_code, ok.session_lifetime_ms) == (ErrorCode.NONE, 400)
                joined = s.call(join("g"))
                beat = HeartbeatRequest[3](group_id="g", generation_id=joined.generation_id,
                                           member_id=joined.member_id, group_instance_id=None)
                assert s.call(beat).error_code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
                time.sleep(0.45)
                s.send(beat)
                assert s.closed_by_peer()

        await in_thread(scenario)


async def test_reauthentication_renews_the_session_but_cannot_change_the_principal(tmp_path):
    async with sasl_kgc(tmp_path, sasl_max_reauth_ms=500) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                assert s.login_scram("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
                for _ in range(3):                      # 3 x 0.3 s: past the first lifetime
                    time.sleep(0.3)
                    again = s.login_scram("alice", PASSWORDS["alice"])
                    assert (again.error_code, again.session_lifetime_ms) == (ErrorCode.NONE, 500)
                    assert s.call(ListGroupsRequest[4](states_filter=[])).error_code == ErrorCode.NONE
            with KafkaSocket(app.port) as s:
                assert s.login_scram("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
                switched = s.login_scram("bob", PASSWORDS["bob"])
                assert switched.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert s.closed_by_peer()

        await in_thread(scenario)


async def test_without_a_lifetime_a_second_handshake_is_an_illegal_state(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                assert s.login_plain("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
                assert s.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
                assert s.call(ListGroupsRequest[4](states_filter=[])).error_code == ErrorCode.NONE

        await in_thread(scenario)


async def test_the_credential_file_is_reloaded_while_kgc_runs(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def login_carol():
            with KafkaSocket(app.port) as s:
                return s.login_scram("carol", "carol-secret").error_code

        assert await in_thread(login_carol) == ErrorCode.SASL_AUTHENTICATION_FAILED
        credentials_file(tmp_path / "users.toml", {**PASSWORDS, "carol": "carol-secret"})
        assert await in_thread(login_carol) == ErrorCode.NONE
