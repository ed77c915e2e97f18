"""kgc's own SASL login on an upstream connection (one of its own, or one it opens for a
client's requests), for clusters that authenticate every connection: SaslHandshake v1, then
SaslAuthenticate with PLAIN or SCRAM (scramp as the client, which also checks the broker's proof)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from scramp import ScramClient, ScramException

from coordinator.gateway.upstream import UpstreamUnavailable

# kafka-python's messages are untyped: a request and its decoded answer are whatever it builds.
Request = Callable[[Any, type], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class UpstreamLogin:
    mechanism: str              # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    username: str
    password: str = ""

    def __repr__(self) -> str:  # never the password
        return f"UpstreamLogin({self.mechanism}, {self.username})"


async def login(request: Request, credentials: UpstreamLogin, where: str) -> None:
    """Raises UpstreamUnavailable naming the step that failed (never the password)."""
    handshake = await request(SaslHandshakeRequest[1](mechanism=credentials.mechanism), SaslHandshakeResponse)
    if handshake.error_code:
        raise UpstreamUnavailable(f"{where} refused SASL mechanism {credentials.mechanism} "
                                  f"(error {handshake.error_code}; it offers {', '.join(handshake.mechanisms)})")

    async def step(token: bytes) -> bytes:
        answer = await request(SaslAuthenticateRequest[1](auth_bytes=token), SaslAuthenticateResponse)
        if answer.error_code:
            raise UpstreamUnavailable(f"{where} refused kgc's login as {credentials.username} "
                                      f"(error {answer.error_code}: {answer.error_message})")
        return bytes(answer.auth_bytes)

    if credentials.mechanism == "PLAIN":
        await step(b"\0" + credentials.username.encode() + b"\0" + credentials.password.encode())
        return
    client = ScramClient([credentials.mechanism], credentials.username, credentials.password)
    try:
        client.set_server_first((await step(client.get_client_first().encode())).decode())
        client.set_server_final((await step(client.get_client_final().encode())).decode())
    except (ScramException, UnicodeDecodeError) as exc:
        raise UpstreamUnavailable(f"{where} answered kgc's SCRAM login wrongly: {exc}") from None
