"""SASL on a listener without SASL: answered here, never forwarded.

A Kafka broker whose listener has no SASL answers SaslHandshake and SaslAuthenticate with
ILLEGAL_SASL_STATE (and no mechanisms): its `KafkaApis` only sees requests that got past
the listener's authenticator, so any SASL frame there comes after "authentication" ended.
kgc answers the same. Forwarding them instead would let a client authenticate its
upstream connection through kgc and look authenticated, while kgc answers the group APIs
for anyone.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from protocol.error_responses import error_response
from protocol.errors import ErrorCode

AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def illegal_state(api_key: int, version: int, message: str | None = AFTER_AUTHENTICATION) -> ApiMessage:
    """SaslHandshake or SaslAuthenticate answered ILLEGAL_SASL_STATE in its own shape."""
    return error_response(api_key, version, None, ErrorCode.ILLEGAL_SASL_STATE, message)
