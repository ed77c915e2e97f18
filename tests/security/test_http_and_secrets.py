"""kgc's HTTP port over TLS with a bearer token, and no credential anywhere kgc writes:
logs (at DEBUG), metrics, /v1/groups."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support.auth_metrics import auth_count
from tests.support.authorization_requests import commit, partition_errors
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.security import KafkaSocket, TestPki, credentials_file

TOKEN = "s3cr3t-token-for-http"


async def test_http_over_tls_wants_the_bearer_token_except_for_probes(tmp_path):
    pki = TestPki(tmp_path)
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, group=TEST_GROUP_CONFIG,
                          http_tls_cert_file=pki.server_cert, http_tls_key_file=pki.server_key,
                          http_auth_token_file=str(tmp_path / "token"))
    async with running_kgc(config) as app, aiohttp.ClientSession() as http:
        base = f"https://127.0.0.1:{app.http.port}"
        tls = pki.client_context()
        async with http.get(f"{base}/healthz", ssl=tls) as r:
            assert r.status == 200
        for path in ("/metrics", "/v1/groups", "/v1/groups/g"):
            async with http.get(base + path, ssl=tls) as r:
                assert r.status == 401, path
            async with http.get(base + path, ssl=tls, headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401, path
        async with http.get(f"{base}/v1/groups", ssl=tls, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            assert r.status == 200


async def test_no_password_or_sasl_bytes_in_logs_metrics_or_groups(tmp_path, caplog):
    before = auth_count("PLAIN", "success"), auth_count("PLAIN", "failure"), auth_count("SCRAM-SHA-512", "failure")
    passwords = {"alice": "pa55-alice-XYZ", "bob": "pa55-bob-XYZ"}
    config = ServerConfig(host="127.0.0.1", port=0, http_port=0, group=TEST_GROUP_CONFIG,
                          security_protocol="sasl_plaintext", sasl_failure_delay_ms=0,
                          sasl_credentials_file=credentials_file(tmp_path / "users.toml", passwords))
    with caplog.at_level(logging.DEBUG):
        async with running_kgc(config) as app, aiohttp.ClientSession() as http:
            def logins():
                with KafkaSocket(app.port) as s:
                    assert s.login_plain("alice", passwords["alice"]).error_code == ErrorCode.NONE
                    assert partition_errors(s.call(commit("g", {"t": 1}))) == {"t": ErrorCode.NONE}
                with KafkaSocket(app.port) as s:
                    assert s.login_plain("bob", "not-" + passwords["bob"]).error_code != ErrorCode.NONE
                with KafkaSocket(app.port) as s:
                    assert s.login_scram("bob", "wrong-" + passwords["bob"]).error_code != ErrorCode.NONE
            await asyncio.to_thread(logins)
            base = f"http://127.0.0.1:{app.http.port}"
            async with http.get(f"{base}/metrics") as r:
                scraped = await r.text()
            async with http.get(f"{base}/v1/groups/g") as r:
                group = await r.text()
    after = auth_count("PLAIN", "success"), auth_count("PLAIN", "failure"), auth_count("SCRAM-SHA-512", "failure")
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]
    assert 'kgc_authentications_total{mechanism="PLAIN",outcome="success"}' in scraped
    for text in (caplog.text, scraped, group):
        assert "pa55" not in text and "XYZ" not in text
        assert "n,,n=" not in text and "c=biws" not in text          # SCRAM messages
