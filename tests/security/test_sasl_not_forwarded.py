"""Without SASL configured, kgc answers SaslHandshake and SaslAuthenticate itself, as a
Kafka broker does on a listener without SASL, and never forwards them: a client must not
authenticate its upstream connection through kgc while kgc answers group APIs for anyone."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, running_kgc
from tests.support.tansu import request_response

pytestmark = pytest.mark.integration


async def _ask(port: int, request, response_class):
    return await asyncio.to_thread(request_response, ("127.0.0.1", port), request, response_class)


@pytest.mark.parametrize("upstream", [True, False], ids=["with-upstream", "standalone"])
async def test_sasl_handshake_is_refused_by_kgc_not_forwarded(tansu, upstream):
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG)
    if upstream:
        # Tansu itself accepts this handshake (error 0, its mechanisms): kgc must not relay it.
        config = replace(config, upstream=(tansu.address,), broker_ports=((tansu.node_id, free_port()),))
    async with running_kgc(config) as app:
        if upstream:
            await asyncio.wait_for(app.cluster.wait_reachable(), 10)
        handshake = await _ask(app.port, SaslHandshakeRequest[1](mechanism="SCRAM-SHA-512"),
                               SaslHandshakeResponse)
        assert (handshake.error_code, handshake.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])

        authenticate = await _ask(app.port, SaslAuthenticateRequest[1](auth_bytes=b"n,,n=alice,r=abc"),
                                  SaslAuthenticateResponse)
        assert authenticate.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert authenticate.auth_bytes == b""
