"""KIP-368 with real clients: with a session lifetime of 1.5 s, librdkafka and kafka-python 3
re-authenticate on their open connections and keep consuming; aiokafka (0.14) does not
re-authenticate, so kgc closes its connections at expiry, and it reconnects and keeps
consuming."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from coordinator import metrics
from coordinator.settings import ServerConfig
from tests.support.admin import create_topic, new_name, produce_sequenced
from tests.support.clients import Member, MemberSettings
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.security import ClientSecurity, credentials_file

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LIFETIME_MS = 1500
PASSWORD = "alice-secret"


def count(outcome: str) -> float:
    return metrics.REGISTRY.get_sample_value(
        "kgc_authentications_total", {"mechanism": "SCRAM-SHA-512", "outcome": outcome}) or 0.0


@pytest.mark.parametrize("library, reauthenticates", [("confluent-kafka", True), ("kafka-python", True),
                                                      ("aiokafka", False)])
async def test_sessions_are_renewed_or_closed_and_the_consumer_carries_on(tansu, tmp_path, library,
                                                                          reauthenticates):
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, upstream=(tansu.address,),
                          broker_ports=((tansu.node_id, free_port()),), security_protocol="sasl_plaintext",
                          sasl_mechanisms=("SCRAM-SHA-512",), sasl_max_reauth_ms=LIFETIME_MS,
                          sasl_failure_delay_ms=0,
                          sasl_credentials_file=credentials_file(tmp_path / "users.toml", {"alice": PASSWORD}))
    async with running_kgc(replace(config)) as app:
        await asyncio.wait_for(app.cluster.wait_reachable(), 10)
        topic = await asyncio.to_thread(create_topic, tansu.bootstrap, 1)
        await asyncio.to_thread(produce_sequenced, tansu.bootstrap, topic, 1, 5)
        security = ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", PASSWORD)
        group = new_name(f"reauth-{library}")
        before = count("reauthenticated"), metrics.SESSIONS_EXPIRED._value.get()
        member = Member(library, MemberSettings(app.config.advertised + f":{app.port}", group, topic,
                                                client_id=group, session_timeout_ms=10_000,
                                                heartbeat_interval_ms=300, security=security)).start()
        try:
            for _ in range(50):                                   # bounded: 5 s, over 3 lifetimes
                await asyncio.sleep(0.1)
                member.check()
            await asyncio.to_thread(produce_sequenced, tansu.bootstrap, topic, 1, 5, first_sequence=5)
            for _ in range(100):
                if len(member.consumed) >= 10:
                    break
                await asyncio.sleep(0.1)
            assert len(member.consumed) >= 10, f"{library} consumed {len(member.consumed)}"
            await asyncio.to_thread(member.commit)
        finally:
            await asyncio.to_thread(member.close)
        reauthenticated = count("reauthenticated") - before[0]
        expired = metrics.SESSIONS_EXPIRED._value.get() - before[1]
        if reauthenticates:
            assert reauthenticated >= 3, (reauthenticated, expired)
        else:
            assert reauthenticated == 0 and expired >= 1, (reauthenticated, expired)
