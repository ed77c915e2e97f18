"""SASL relayed to the upstream (`sasl_mode = "passthrough"`): the client's SaslHandshake
and SaslAuthenticate go, as they are, on that client's own upstream connection, so the
upstream checks the password and every request kgc forwards afterwards runs there as the
client. kgc reads the principal from the exchange, and accepts it only on a well-formed
upstream success, because kgc answers the group APIs itself and must know who asks:

- PLAIN: the authcid of `authzid NUL authcid NUL password` (authzid empty or equal, as
  Kafka requires); success is error 0 with empty server bytes.
- SCRAM-SHA-256/512: `n=` of the client-first message (`=2C`/`=3D` unescaped; only the
  `n` channel-binding flag, authzid empty or equal, no `tokenauth` extension: Kafka's own
  grammar); success is error 0 *and* a server-final starting `v=`. A broker that answers
  error 0 with `e=...` (some Kafka-compatible brokers do) has refused: kgc answers the
  client SASL_AUTHENTICATION_FAILED and closes.
- Other mechanisms (GSSAPI, OAUTHBEARER) cannot be read here: UNSUPPORTED_SASL_MECHANISM
  with the list kgc can relay, then close.

The session lifetime is the upstream's (SaslAuthenticate v1+): past it, the next request
other than a SaslHandshake closes the connection, even one kgc answers itself. Re-
authentication is relayed the same way and must keep the principal. An upstream error
is relayed to the client and the connection closes, as the broker would close it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.net.authentication import (
    MECHANISMS,
    PLAIN,
    Answer,
    AuthState,
    SaslSession,
    failed_response,
)
from coordinator.net.sasl import illegal_state
from protocol.messages import response_class

log = logging.getLogger(__name__)

# Kafka's ScramMessages.ClientFirstMessage: gs2 header "n,[a=authzid]," then n=, r=, extensions.
_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,n=(?P<name>(?:[^=,]|=2C|=3D)+),r=[^,]+(?P<ext>(?:,.*)?)")


def scram_user(token: bytes) -> str | None:
    try:
        text = token.decode("ascii")
    except UnicodeDecodeError:
        return None
    match = _CLIENT_FIRST.fullmatch(text)
    if match is None or "tokenauth=" in (match["ext"] or ""):
        return None
    user = match["name"].replace("=2C", ",").replace("=3D", "=")
    if match["authzid"] not in (None, "", user):
        return None
    return user


def plain_user(token: bytes) -> str | None:
    parts = token.split(b"\0")
    if len(parts) != 3 or not parts[1] or not parts[2] or parts[0] not in (b"", parts[1]):
        return None
    try:
        return parts[1].decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True, slots=True)
class PassthroughSettings:
    mechanisms: tuple[str, ...] = MECHANISMS

    def session(self, clock: Callable[[], float], peer: str, upstream) -> PassthroughSession:
        if upstream is None:
            raise ValueError("SASL passthrough needs an upstream")
        return PassthroughSession(self, clock, peer, upstream)


class PassthroughSession(SaslSession):
    """Same barrier and lifetime rules as terminate mode (`SaslSession.admit`); the
    exchange itself goes upstream."""

    __slots__ = ("_upstream", "_claimed", "_round")

    def __init__(self, settings: PassthroughSettings, clock: Callable[[], float], peer: str, upstream):
        super().__init__(settings, clock, peer)
        self._upstream = upstream
        self._claimed: str | None = None
        self._round = 0

    def handshake(self, header, payload: bytes, request) -> Answer | asyncio.Future:
        refused = self._refuse_handshake(request)
        if refused is not None:
            return refused
        return self._relay(header, payload, partial(self._handshaken, request.mechanism))

    def _handshaken(self, wanted: str, response, frame: bytes) -> Answer:
        if response.error_code:
            self.state = AuthState.FAILED
            return frame, True
        self.state = AuthState.HANDSHAKEN
        self.mechanism = wanted
        self._round = 0
        return frame, False

    def authenticate(self, header, payload: bytes, request) -> Answer | asyncio.Future:
        version = request.version
        if self.state is not AuthState.HANDSHAKEN:
            return illegal_state(ApiKey.SaslAuthenticate, version, "SaslAuthenticate out of turn"), True
        token = bytes(request.auth_bytes)
        if self._round == 0:
            self._claimed = plain_user(token) if self.mechanism == PLAIN else scram_user(token)
            if self._claimed is None:
                return self._refuse(version, "a first SASL message kgc cannot read"), True
        self._round += 1
        return self._relay(header, payload, partial(self._authenticated, version))

    def _authenticated(self, version: int, response, frame: bytes) -> Answer:
        if response.error_code:
            self.state = AuthState.FAILED
            self.principal = None
            metrics.sasl_attempt(self.mechanism, "failure")
            log.info("upstream refused the login of %r from %s (error %d)", self._claimed, self._peer,
                     response.error_code)
            return frame, True
        server = bytes(response.auth_bytes)
        if self.mechanism != PLAIN and self._round == 1:
            return frame, False                                 # SCRAM server-first: one more round
        if (self.mechanism == PLAIN and server) or (self.mechanism != PLAIN and not server.startswith(b"v=")):
            return self._refuse(version, "upstream answered success without a valid final message"), True
        principal = f"User:{self._claimed}"
        if self._reauthenticating and principal != self.principal:
            return self._refuse(version, f"re-authentication as {principal}, was {self.principal}"), True
        lifetime = (response.session_lifetime_ms or 0) if version >= 1 else 0
        self.state = AuthState.AUTHENTICATED
        self.principal = principal
        self.expires_at = self._clock() + lifetime if lifetime > 0 else None
        metrics.sasl_attempt(self.mechanism, "reauthenticated" if self._reauthenticating else "success")
        self._reauthenticating = False
        return frame, False

    def _refuse(self, version: int, why: str):
        self.state = AuthState.FAILED
        self.principal = None
        metrics.sasl_attempt(self.mechanism, "failure")
        log.info("refusing SASL from %s with %s: %s", self._peer, self.mechanism, why)
        return failed_response(version, self.mechanism)

    def _relay(self, header, payload: bytes, judge) -> asyncio.Future:
        answer = asyncio.get_running_loop().create_future()
        sent = self._upstream.forward(header, payload)

        def done(fut: asyncio.Future) -> None:
            if answer.done():
                return
            if fut.cancelled():
                answer.cancel()
            elif fut.exception() is not None:
                answer.set_exception(fut.exception())
            else:
                frame = fut.result()
                response = response_class(header.api_key).decode(frame[4:], version=header.api_version, header=True)
                answer.set_result(judge(response, frame))
        sent.add_done_callback(done)
        return answer
