"""SaslHandshake and SaslAuthenticate (coordinator/net/sasl.py decides the login)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse


def sasl_handshake_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return SaslHandshakeResponse(version=version, error_code=code, mechanisms=[])


def sasl_authenticate_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return SaslAuthenticateResponse(version=version, error_code=code, error_message=message, auth_bytes=b"",
                                    session_lifetime_ms=0)
