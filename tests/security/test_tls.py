"""TLS on kgc's listeners and to the upstream: checked certificates, mTLS, reload without
a restart, the wrong protocol on either side, and principals from certificate DNs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from coordinator.security.principal import MappingRuleError, PrincipalMapper
from coordinator.settings import ConfigError, ServerConfig, load_config
from protocol.errors import ErrorCode
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.security import KafkaSocket, TestPki
from tests.support.tansu import TansuBroker
from tests.support.tls_relay import TlsRelay

API_VERSIONS = ApiVersionsRequest[3](client_software_name="t", client_software_version="1")


@pytest.fixture
def pki(tmp_path):
    return TestPki(tmp_path)


@contextlib.asynccontextmanager
async def tls_kgc(pki: TestPki, **settings):
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, security_protocol="ssl",
                          tls_cert_file=pki.server_cert, tls_key_file=pki.server_key, **settings)
    async with running_kgc(config) as app:
        yield app


def subject(sock: ssl.SSLSocket) -> dict:
    return {k: v for rdn in sock.getpeercert()["subject"] for k, v in rdn}


async def test_a_tls_listener_answers_behind_a_checked_certificate(pki, tmp_path):
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    async with tls_kgc(pki) as app:
        def scenario():
            with KafkaSocket(app.port, context=pki.client_context()) as s:   # checks 127.0.0.1 is named
                assert s.call(API_VERSIONS).error_code == ErrorCode.NONE
            stranger = TestPki(other_dir)
            with pytest.raises(ssl.SSLCertVerificationError):
                KafkaSocket(app.port, context=stranger.client_context())
            with socket.create_connection(("127.0.0.1", app.port), timeout=5) as plain:
                plain.sendall(API_VERSIONS.encode(header=True, framed=True))
                assert plain.recv(100) == b""          # the TLS handshake fails: closed, no answer

        await asyncio.to_thread(scenario)


async def test_a_tls_client_on_a_plaintext_listener_is_named_in_the_log(pki, caplog):
    async with running_kgc() as app:
        def scenario():
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                KafkaSocket(app.port, context=pki.client_context())

        with caplog.at_level(logging.WARNING, logger="coordinator.net.connection"):
            await asyncio.to_thread(scenario)
    assert "speaks TLS to a plaintext listener" in caplog.text


async def test_certificates_are_reloaded_without_a_restart(pki):
    async with tls_kgc(pki) as app:
        def connect() -> KafkaSocket:
            return KafkaSocket(app.port, context=pki.client_context())

        before = await asyncio.to_thread(connect)
        with before:
            assert subject(before.sock)["organizationalUnitName"] != "rotated"
            pki.issue("server", "127.0.0.1", "localhost", organization_unit="rotated")   # same files
            assert app.tls.reload_if_changed()
            after = await asyncio.to_thread(connect)
            with after:
                assert subject(after.sock)["organizationalUnitName"] == "rotated"
                assert (await asyncio.to_thread(after.call, API_VERSIONS)).error_code == ErrorCode.NONE
            # The connection made before the rotation keeps working on its own session.
            assert (await asyncio.to_thread(before.call, API_VERSIONS)).error_code == ErrorCode.NONE
        assert not app.tls.reload_if_changed()


async def test_mtls_required_refuses_clients_without_a_certificate(pki):
    async with tls_kgc(pki, tls_client_ca_file=pki.ca_file, tls_client_auth="required") as app:
        alice = pki.issue("alice", common_name="alice", organization_unit="eng")

        def scenario():
            with KafkaSocket(app.port, context=pki.client_context(alice)) as s:
                assert s.call(API_VERSIONS).error_code == ErrorCode.NONE
            # TLS 1.3: the client's handshake ends before the server checks; the refusal
            # arrives as an alert (or a close) on the first read.
            with pytest.raises((ssl.SSLError, ConnectionError)):
                with KafkaSocket(app.port, context=pki.client_context()) as s:
                    s.call(API_VERSIONS)

        await asyncio.to_thread(scenario)


@contextlib.contextmanager
def tansu_behind(relay_port: int):
    """A Tansu of its own that advertises the relay's port, started on this (main) thread."""
    with TansuBroker(advertised_port=relay_port) as broker:
        yield broker


@pytest.mark.integration
async def test_kgc_reaches_the_upstream_over_tls_and_checks_its_certificate(pki, tmp_path):
    relay = TlsRelay(ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), free_port())
    relay._context.load_cert_chain(pki.server_cert, pki.server_key)
    with tansu_behind(relay.port) as broker:
        await relay.start(broker.address)
        try:
            config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(("127.0.0.1", relay.port),),
                                  broker_ports=((broker.node_id, free_port()),),
                                  upstream_security_protocol="ssl", upstream_tls_ca_file=pki.ca_file)
            async with running_kgc(config) as app:
                await asyncio.wait_for(app.cluster.wait_reachable(), 10)
                assert app.cluster.brokers[broker.node_id].port == relay.port

            (tmp_path / "stranger").mkdir()
            stranger = TestPki(tmp_path / "stranger")
            distrusting = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG,
                                       upstream=(("127.0.0.1", relay.port),),
                                       broker_ports=((broker.node_id, free_port()),),
                                       upstream_security_protocol="ssl", upstream_tls_ca_file=stranger.ca_file)
            async with running_kgc(distrusting) as app:
                await asyncio.sleep(0.5)
                assert not app.cluster.reachable
                assert "CERTIFICATE_VERIFY_FAILED" in app.cluster.status
        finally:
            await relay.close()


def test_principal_mapping_rules_follow_kafka():
    rules = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")
    assert rules.name("CN=kafka-admin,OU=ServiceUsers,O=Unknown") == "kafka-admin"
    assert rules.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=California,C=US") == "duke@javasoft"
    assert rules.name("OU=Lab,cn=node1.x,O=y") == "NODE1.X"
    assert rules.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    with pytest.raises(MappingRuleError, match="no ssl_principal_mapping_rules rule"):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")
    with pytest.raises(ConfigError, match="ssl_principal_mapping_rules"):
        load_config({"ssl_principal_mapping_rules": "RULE:broken"}, {})


def test_tls_settings_that_contradict_each_other_are_refused(pki):
    with pytest.raises(ConfigError, match="needs tls_cert_file"):
        load_config({"security_protocol": "ssl", "standalone": "true"}, {})
    with pytest.raises(ConfigError, match="needs tls_client_ca_file"):
        load_config({"security_protocol": "ssl", "tls_cert_file": pki.server_cert, "tls_key_file": pki.server_key,
                     "tls_client_auth": "required", "standalone": "true"}, {})
    with pytest.raises(ConfigError, match="the listeners do not use TLS"):
        load_config({"tls_cert_file": pki.server_cert, "standalone": "true"}, {})
    with pytest.raises(ConfigError, match="upstream_security_protocol is plaintext"):
        load_config({"upstream_tls_ca_file": pki.ca_file, "standalone": "true"}, {})
