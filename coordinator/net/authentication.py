"""SASL authentication of one client connection, terminated by kgc (`sasl_mode = "terminate"`).

The states follow Kafka's `SaslServerAuthenticator` and `SocketServer`:

    START ──SaslHandshake(enabled M)──► HANDSHAKEN(M) ──SaslAuthenticate…──► AUTHENTICATED
      │                                   │ wrong proof / password: 58, close   │
      │ any API but ApiVersions: close    │ any API but SaslAuthenticate: close  │ lifetime over:
      ▼                                   ▼                                      ▼ next non-SASL
    closed                              closed        SaslHandshake (KIP-368) ◄──┘ request closes

- Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are read;
  anything else closes the connection without an answer, as Kafka does.
- SaslHandshake with a mechanism not enabled: UNSUPPORTED_SASL_MECHANISM (33) with the
  enabled list, then close. v0 (raw SASL tokens after it) is not served: kgc advertises 1.
- A failed exchange: SASL_AUTHENTICATION_FAILED (58) with Kafka's generic message (it
  never says whether the user exists), answered after `failure_delay_ms` (Kafka's
  `connection.failed.authentication.delay.ms`), then close.
- Session lifetime (KIP-368): `max_reauth_ms` (Kafka's `connections.max.reauth.ms`) goes
  to the client in SaslAuthenticate v1+; once it has passed, the next request other than
  a SaslHandshake closes the connection, even a Heartbeat kgc would answer itself. A
  re-authentication must use the same mechanism and yield the same principal.
- Authenticated again without a lifetime (no re-authentication possible): SASL requests
  get ILLEGAL_SASL_STATE, as Kafka's `KafkaApis` answers them.

Auth bytes and passwords are never logged; only the user name and the outcome.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from scramp import ScramException, ScramMechanism
from scramp.core import ScramServer

from coordinator import metrics
from coordinator.net.connection import ProtocolViolation
from coordinator.net.sasl import illegal_state
from coordinator.security.credentials import SCRAM_MECHANISMS, CredentialStore
from protocol.errors import ErrorCode
from protocol.messages import response_class

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
MECHANISMS = (*SCRAM_MECHANISMS, PLAIN)

# (response, close the connection once it is written)
Answer = tuple[ApiMessage, bool]


@dataclass(frozen=True, slots=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    credentials: CredentialStore
    max_reauth_ms: int = 0            # 0: sessions never expire
    failure_delay_ms: int = 100

    def session(self, clock: Callable[[], float], peer: str, upstream) -> TerminatedSession:
        return TerminatedSession(self, clock, peer)


class AuthState(enum.Enum):
    START = "start"
    HANDSHAKEN = "handshaken"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class SaslSession:
    """The authentication of one connection, as both modes keep it: its state, the barrier
    before login, the handshake's refusals and the session's lifetime. `clock` gives
    monotonic milliseconds. `TerminatedSession` judges the exchange itself;
    `passthrough.PassthroughSession` has the upstream judge it."""

    __slots__ = ("_mechanisms", "_clock", "_peer", "state", "mechanism", "principal", "expires_at",
                 "_reauthenticating")

    def __init__(self, mechanisms: tuple[str, ...], clock: Callable[[], float], peer: str):
        self._mechanisms = mechanisms
        self._clock = clock
        self._peer = peer
        self.state = AuthState.START
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.expires_at: float | None = None
        self._reauthenticating = False

    # ---- the barrier ------------------------------------------------------------------

    def admit(self, api_key: int) -> None:
        """Raises ProtocolViolation (close, no answer) unless `api_key` may be served now."""
        if self.principal is None:
            raise ProtocolViolation(f"{_name(api_key)} before SASL authentication completed")
        if self.expires_at is not None and self._clock() >= self.expires_at:
            metrics.sasl_session_expired()
            raise ProtocolViolation(f"SASL session of {self.principal} expired without re-authentication")

    # ---- SaslHandshake ----------------------------------------------------------------

    def handshake(self, header, payload: bytes, request) -> Answer | asyncio.Future:
        raise NotImplementedError

    def authenticate(self, header, payload: bytes, request) -> Answer | asyncio.Future:
        raise NotImplementedError

    def _refuse_handshake(self, request) -> Answer | None:
        """The answer to a SaslHandshake that may not start an exchange, else None (and a
        handshake on an authenticated connection starts a re-authentication)."""
        version, wanted = request.version, request.mechanism
        enabled = list(self._mechanisms)
        if self.state is AuthState.AUTHENTICATED:
            if self.expires_at is None:
                return illegal_state(ApiKey.SaslHandshake, version), False
            if wanted != self.mechanism:
                log.info("closing connection from %s: re-authentication changed mechanism", self._peer)
                return handshake_response(version, ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled), True
            self._reauthenticating = True
        elif self.state is not AuthState.START:
            return illegal_state(ApiKey.SaslHandshake, version), True
        elif wanted not in enabled:
            metrics.sasl_attempt(wanted, "unsupported_mechanism")
            return handshake_response(version, ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled), True
        return None


class TerminatedSession(SaslSession):
    """A login kgc judges itself, against its credential store."""

    __slots__ = ("_settings", "_scram", "_scram_user")

    def __init__(self, settings: SaslSettings, clock: Callable[[], float], peer: str):
        super().__init__(settings.mechanisms, clock, peer)
        self._settings = settings
        self._scram: ScramServer | None = None
        self._scram_user: str | None = None

    # ---- SaslHandshake ----------------------------------------------------------------

    def handshake(self, header, payload: bytes, request) -> Answer:
        refused = self._refuse_handshake(request)
        if refused is not None:
            return refused
        self.state = AuthState.HANDSHAKEN
        self.mechanism = request.mechanism
        self._scram = None
        return handshake_response(request.version, ErrorCode.NONE, list(self._mechanisms)), False

    # ---- SaslAuthenticate -------------------------------------------------------------

    def authenticate(self, header, payload: bytes, request) -> Answer | asyncio.Future:
        version = request.version
        if self.state is not AuthState.HANDSHAKEN:
            message = "SaslAuthenticate before SaslHandshake" if self.principal is None else None
            return illegal_state(ApiKey.SaslAuthenticate, version, message or "SaslAuthenticate out of turn"), True
        if self.mechanism == PLAIN:
            return self._plain(version, bytes(request.auth_bytes))
        return self._scram_round(version, bytes(request.auth_bytes))

    def _plain(self, version: int, token: bytes) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        parts = token.split(b"\0")
        if len(parts) != 3 or not parts[1] or not parts[2] or parts[0] not in (b"", parts[1]):
            # Kafka's PlainSaslServer: two NULs, user and password non-empty, authzid empty or the user.
            self._fail(version, answer, "malformed PLAIN token")
            return answer
        try:
            user, password = parts[1].decode("utf-8"), parts[2].decode("utf-8")
        except UnicodeDecodeError:
            self._fail(version, answer, "PLAIN token is not UTF-8")
            return answer
        checked = loop.run_in_executor(None, self._settings.credentials.check_plain, user, password)

        def done(fut: asyncio.Future) -> None:
            if answer.done():
                return
            if not fut.cancelled() and fut.exception() is None and fut.result():
                answer.set_result(self._succeed(version, user, b""))
            else:
                self._fail(version, answer, f"wrong password or unknown user {user!r}")
        checked.add_done_callback(done)
        return answer

    def _scram_round(self, version: int, token: bytes) -> Answer | asyncio.Future:
        mechanism = self.mechanism
        assert mechanism is not None, "a handshaken session has its mechanism"
        try:
            message = token.decode("utf-8")
            if self._scram is None:
                self._scram = server = ScramMechanism(mechanism).make_server(partial(self._scram_credentials, mechanism))
                server.set_client_first(message)
                return authenticate_response(version, ErrorCode.NONE, None, server.get_server_first().encode()), False
            self._scram.set_client_final(message)
            server_final = self._scram.get_server_final().encode()
        except (ScramException, UnicodeDecodeError, ValueError, KeyError) as exc:
            answer = asyncio.get_running_loop().create_future()
            self._fail(version, answer, f"SCRAM exchange failed ({type(exc).__name__})"
                       + (f" for user {self._scram_user!r}" if self._scram_user else ""))
            return answer
        user = self._scram_user
        assert user is not None, "a SCRAM exchange that succeeded looked its user up"
        return self._succeed(version, user, server_final)

    def _scram_credentials(self, mechanism: str, saslname: str) -> tuple[bytes, bytes, bytes, int]:
        # Kafka's ScramFormatter.username: saslname escapes "," as =2C and "=" as =3D.
        user = saslname.replace("=2C", ",").replace("=3D", "=")
        self._scram_user = user
        return self._settings.credentials.scram(user, mechanism)

    # ---- outcomes ---------------------------------------------------------------------

    def _succeed(self, version: int, user: str, server_bytes: bytes) -> Answer:
        principal = f"User:{user}"
        if self._reauthenticating and principal != self.principal:
            metrics.sasl_attempt(self.mechanism, "failure")
            log.info("closing connection from %s: re-authentication as %s, was %s", self._peer,
                     principal, self.principal)
            return authenticate_response(version, ErrorCode.SASL_AUTHENTICATION_FAILED,
                                 "Cannot change principals during re-authentication", b""), True
        lifetime = self._settings.max_reauth_ms
        self.state = AuthState.AUTHENTICATED
        self.principal = principal
        self.expires_at = self._clock() + lifetime if lifetime > 0 else None
        self._scram = None
        metrics.sasl_attempt(self.mechanism, "reauthenticated" if self._reauthenticating else "success")
        log.debug("%s authenticated as %s with %s", self._peer, principal, self.mechanism)
        self._reauthenticating = False
        return authenticate_response(version, ErrorCode.NONE, None, server_bytes, lifetime), False

    def _fail(self, version: int, answer: asyncio.Future, why: str) -> None:
        mechanism = self.mechanism
        self.state = AuthState.FAILED
        self.principal = None
        self._scram = None
        metrics.sasl_attempt(mechanism, "failure")
        log.info("authentication failed from %s with %s: %s", self._peer, mechanism, why)
        response = failed_response(version, mechanism)
        loop = asyncio.get_running_loop()
        loop.call_later(self._settings.failure_delay_ms / 1000, _settle, answer, (response, True))


def _settle(answer: asyncio.Future, result: Answer) -> None:
    if not answer.done():
        answer.set_result(result)


def failed_response(version: int, mechanism: str | None) -> ApiMessage:
    """Kafka's answer to failed credentials: one message whether or not the user exists."""
    return authenticate_response(version, ErrorCode.SASL_AUTHENTICATION_FAILED,
                         "Authentication failed during authentication due to invalid credentials with SASL "
                         f"mechanism {mechanism}", b"")


def handshake_response(version: int, code: int, mechanisms: list[str]) -> ApiMessage:
    return response_class(ApiKey.SaslHandshake)(version=version, error_code=code, mechanisms=mechanisms)


def authenticate_response(version: int, code: int, message: str | None, auth_bytes: bytes, lifetime_ms: int = 0) -> ApiMessage:
    return response_class(ApiKey.SaslAuthenticate)(version=version, error_code=code, error_message=message,
                                                   auth_bytes=auth_bytes, session_lifetime_ms=lifetime_ms)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
