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
- OAUTHBEARER: the client's RFC 7628 initial response (`n,[a=authzid],^Aauth=Bearer
  <JWT>^A...^A^A`, Kafka's grammar) carries a JWT; the principal is its claim named by
  `oauthbearer_claim` (default `sub`, Kafka's `sasl.oauthbearer.sub.claim.name`), read
  from the base64url JSON payload. kgc does *not* check the signature, the issuer or the
  expiry: the upstream validates the token, and kgc trusts the claim only after the
  upstream's success (error 0, empty server bytes). A token kgc cannot read, or one
  without the claim (or with an authzid other than it, which Kafka refuses too), is
  refused before it goes upstream. A broker refusing a token answers error 0 with an
  RFC 7628 error JSON, the client acknowledges with `^A` and the broker then fails the
  exchange: kgc relays those rounds and never counts them as a login.
- Other mechanisms (GSSAPI) cannot be read here: UNSUPPORTED_SASL_MECHANISM with the
  list kgc can relay, then close.

The session lifetime is the upstream's (SaslAuthenticate v1+): past it, the next request
other than a SaslHandshake closes the connection, even one kgc answers itself. Re-
authentication is relayed the same way and must keep the principal. An upstream error
is relayed to the client and the connection closes, as the broker would close it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
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
    authenticate_response,
    failed_response,
)
from coordinator.net.sasl import illegal_state
from protocol.errors import ErrorCode
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


OAUTHBEARER = "OAUTHBEARER"
# Kafka's OAuthBearerClientInitialResponse: gs2 header, ^A, key=value^A pairs, ^A.
_OAUTH_FIRST = re.compile(r"n,(?:a=(?P<authzid>(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,\x01"
                          r"(?P<pairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01")
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(?P<token>[-_.a-zA-Z0-9]+)")


class OAuthBearerError(ValueError):
    """An OAUTHBEARER initial response kgc cannot take a principal from; says why."""


def oauthbearer_user(message: bytes, claim: str) -> str:
    """The value of the JWT's `claim` in an RFC 7628 client initial response. The
    signature is not checked here: the upstream checks it before kgc trusts the name."""
    try:
        match = _OAUTH_FIRST.fullmatch(message.decode("ascii"))
    except UnicodeDecodeError:
        match = None
    if match is None:
        raise OAuthBearerError("not an RFC 7628 OAUTHBEARER initial response")
    pairs = dict(pair.split("=", 1) for pair in match["pairs"].split("\x01") if pair)
    bearer = _BEARER.fullmatch(pairs.get("auth", ""))
    if bearer is None:
        raise OAuthBearerError("no auth=Bearer <token> in the OAUTHBEARER message")
    parts = bearer["token"].split(".")
    if len(parts) != 3:
        raise OAuthBearerError("the bearer token is not a JWT (header.payload.signature)")
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        raise OAuthBearerError("the JWT payload is not base64url-encoded JSON") from None
    name = payload.get(claim) if isinstance(payload, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise OAuthBearerError(f"the JWT has no {claim!r} claim naming the principal")
    authzid = match["authzid"]
    if authzid is not None and authzid.replace("=2C", ",").replace("=3D", "=") != name:
        raise OAuthBearerError(f"authzid differs from the token's {claim!r} claim")
    return name


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
    oauthbearer_claim: str = "sub"

    def session(self, clock: Callable[[], float], peer: str, upstream) -> PassthroughSession:
        if upstream is None:
            raise ValueError("SASL passthrough needs an upstream")
        return PassthroughSession(self, clock, peer, upstream)


class PassthroughSession(SaslSession):
    """Same barrier and lifetime rules as terminate mode (`SaslSession.admit`); the
    exchange itself goes upstream."""

    __slots__ = ("_claim", "_upstream", "_claimed", "_round")

    def __init__(self, settings: PassthroughSettings, clock: Callable[[], float], peer: str, upstream):
        super().__init__(settings.mechanisms, clock, peer)
        self._claim = settings.oauthbearer_claim
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
            if self.mechanism == OAUTHBEARER:
                try:
                    self._claimed = oauthbearer_user(token, self._claim)
                except OAuthBearerError as exc:
                    return self._refuse(version, str(exc), tell_client=True), True
            else:
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
        if self.mechanism == OAUTHBEARER:
            if self._round == 1 and server:
                return frame, False               # the broker's error JSON: the client acknowledges, it fails
            if self._round > 1:
                return self._refuse(version, "upstream answered success after refusing the token"), True
        elif self.mechanism != PLAIN and self._round == 1:
            return frame, False                                 # SCRAM server-first: one more round
        elif (self.mechanism == PLAIN and server) or (self.mechanism != PLAIN and not server.startswith(b"v=")):
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

    def _refuse(self, version: int, why: str, *, tell_client: bool = False):
        """`tell_client`: the reason is about the client's own token, not about credentials."""
        self.state = AuthState.FAILED
        self.principal = None
        metrics.sasl_attempt(self.mechanism, "failure")
        log.info("refusing SASL from %s with %s: %s", self._peer, self.mechanism, why)
        if tell_client:
            return authenticate_response(version, ErrorCode.SASL_AUTHENTICATION_FAILED,
                                         f"Authentication failed: {why}", b"")
        return failed_response(version, self.mechanism)

    def _relay(self, header, payload: bytes, judge) -> asyncio.Future:
        answer = asyncio.get_running_loop().create_future()
        sent = self._upstream.forward(header, payload)

        def done(fut: asyncio.Future) -> None:
            if answer.done():
                return
            if fut.cancelled():
                answer.cancel()
            elif (exc := fut.exception()) is not None:
                answer.set_exception(exc)
            else:
                frame = fut.result()
                response = response_class(header.api_key).decode(frame[4:], version=header.api_version, header=True)
                answer.set_result(judge(response, frame))
        sent.add_done_callback(done)
        return answer
