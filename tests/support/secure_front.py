"""A secured Kafka broker for passthrough tests, made of Tansu and this front.

The bundled Tansu has no TLS, no PLAIN and no stored SCRAM users, so kgc's passthrough
tests put this loopback server between kgc and Tansu. It behaves as a Kafka broker with a
SASL_SSL listener does: TLS; before authentication only ApiVersions (forwarded),
SaslHandshake and SaslAuthenticate, anything else closes; PLAIN checked against a dict,
SCRAM by `scramp`'s server (an implementation independent of kgc's); a failure answers
SASL_AUTHENTICATION_FAILED and closes; an optional session lifetime, after which the
next request other than a SaslHandshake closes (KIP-368 re-authentication accepted).
Everything else after login is piped to Tansu, which is started advertising the front's
port. `scram_failure_as_success` imitates brokers that answer a failed SCRAM exchange with
error 0 and `e=...` (Tansu 0.6 does), which kgc must not take for a login;
`oauth_failure_as_success` a broker that answers the acknowledgement of a refused token
with error 0.

OAUTHBEARER is validated as Kafka's default unsecured validator does
(`OAuthBearerUnsecuredValidatorCallbackHandler`): an unsigned JWT (`alg` none, empty
signature) whose `exp` is in the future and whose `oauth_claim` (Kafka's
`sasl.oauthbearer.sub.claim.name`) is a string naming the principal. A bad token is
answered as Kafka's `OAuthBearerSaslServer` does: error 0 with the RFC 7628 error JSON,
then, after the client's `\x01` acknowledgement, SASL_AUTHENTICATION_FAILED and close.

`logins` lists the principal of every successful exchange, in order. `acls` are the
broker's ACL bindings, as DescribeAcls returns them (whatever the filter); None answers
SECURITY_DISABLED, as a broker without an authorizer does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import ssl
import struct
import time

from kafka.protocol.admin import DescribeAclsResponse
from kafka.protocol.api_key import ApiKey
from scramp import ScramException, ScramMechanism

from protocol.errors import ErrorCode
from protocol.headers import parse_request_header
from protocol.messages import decode_request, encode_response, response_class
from tests.support.tls_relay import LoopbackTlsServer

_SIZE = struct.Struct(">i")
MECHANISMS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER"]
_BEARER = re.compile(rb"n,[^,]*,\x01(?:[A-Za-z]+=[^\x01]*\x01)*?auth=[Bb]earer +([-_.A-Za-z0-9]+)\x01.*\x01", re.S)
INVALID_TOKEN = b'{"status":"invalid_token"}'


def _unsecured_principal(message: bytes, claim: str) -> str | None:
    match = _BEARER.fullmatch(message)
    if match is None:
        return None
    try:
        header, payload, signature = (json.loads(base64.urlsafe_b64decode(p + b"=" * (-len(p) % 4))) if p else None
                                      for p in match[1].split(b"."))
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("alg") != "none" or signature is not None:
        return None
    name = payload.get(claim) if isinstance(payload, dict) else None
    expires = payload.get("exp") if isinstance(payload, dict) else None
    if not isinstance(name, str) or not name or not isinstance(expires, int | float) or expires <= time.time():
        return None
    return name


class SecureFront(LoopbackTlsServer):
    def __init__(self, context: ssl.SSLContext, port: int, users: dict[str, str], *,
                 session_lifetime_ms: int = 0, scram_failure_as_success: bool = False, oauth_claim: str = "sub",
                 oauth_failure_as_success: bool = False):
        super().__init__(context, port)
        self.oauth_claim = oauth_claim
        self.oauth_failure_as_success = oauth_failure_as_success
        self._users = dict(users)
        self._scram = {(user, m): ScramMechanism(m).make_auth_info(password, iteration_count=4096)
                       for user, password in users.items() for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
        self.session_lifetime_ms = session_lifetime_ms
        self.scram_failure_as_success = scram_failure_as_success
        self.logins: list[str] = []
        # (resource type, name, pattern type, principal, host, operation, permission), Kafka's codes
        self.acls: list[tuple[int, str, int, str, str, int, int]] | None = []

    def set_password(self, user: str, password: str) -> None:
        """A password changed on the broker: connections logged in already stay so."""
        self._users[user] = password
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            self._scram[(user, m)] = ScramMechanism(m).make_auth_info(password, iteration_count=4096)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await _Connection(self, reader, writer).run()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


class _Connection:
    def __init__(self, front: SecureFront, reader, writer):
        self.front, self.reader, self.writer = front, reader, writer
        self.principal: str | None = None
        self.mechanism: str | None = None
        self.scram = None
        self.scram_user: str | None = None
        self.token_refused = False
        self.expires: float | None = None
        self.outstanding = 0
        self.drained = asyncio.Event()
        self.drained.set()

    async def run(self) -> None:
        up_reader, self.up_writer = await asyncio.open_connection(*self.front.target)
        pump = asyncio.ensure_future(self._pump(up_reader))
        try:
            while True:
                size = _SIZE.unpack(await self.reader.readexactly(4))[0]
                payload = await self.reader.readexactly(size)
                header = parse_request_header(payload)
                if header.api_key == ApiKey.ApiVersions:
                    self._forward(payload)
                elif header.api_key in (ApiKey.SaslHandshake, ApiKey.SaslAuthenticate):
                    request = decode_request(header.api_key, header.api_version, payload[header.header_len:])
                    response, close = self._sasl(header.api_key, request)
                    await self.drained.wait()       # answers stay in request order
                    self.writer.write(encode_response(header, response, header.api_version))
                    await self.writer.drain()
                    if close:
                        return
                elif self.principal is None or (self.expires is not None and time.monotonic() > self.expires):
                    return                           # Kafka: close, no answer
                elif header.api_key == ApiKey.DescribeAcls:
                    await self.drained.wait()
                    self.writer.write(encode_response(header, self._acls(header.api_version), header.api_version))
                else:
                    self._forward(payload)
        finally:
            pump.cancel()
            self.up_writer.close()

    def _forward(self, payload: bytes) -> None:
        self.outstanding += 1
        self.drained.clear()
        self.up_writer.write(_SIZE.pack(len(payload)) + payload)

    async def _pump(self, up_reader) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ssl.SSLError):
            while True:
                head = await up_reader.readexactly(4)
                body = await up_reader.readexactly(_SIZE.unpack(head)[0])
                self.writer.write(head + body)
                self.outstanding = max(0, self.outstanding - 1)
                if not self.outstanding:
                    self.drained.set()

    def _sasl(self, api_key: int, request):
        version = request.version
        if api_key == ApiKey.SaslHandshake:
            ok = request.mechanism in MECHANISMS and (self.principal is None or self.expires is not None)
            self.mechanism, self.scram, self.token_refused = request.mechanism, None, False
            return response_class(api_key)(version=version, error_code=0 if ok else ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                           mechanisms=MECHANISMS), not ok
        token = bytes(request.auth_bytes)
        if self.mechanism == "PLAIN":
            _, user, password = (token.split(b"\0") + [b"", b""])[:3]
            if self.front._users.get(user.decode()) == password.decode():
                return self._success(version, user.decode(), b"")
            return self._failure(version)
        if self.mechanism == "OAUTHBEARER":
            if self.token_refused:                    # the client's acknowledgement of the error JSON
                if self.front.oauth_failure_as_success:
                    return self._answer(version, 0, b""), False
                return self._failure(version)
            user = _unsecured_principal(token, self.front.oauth_claim)
            if user is None:
                self.token_refused = True
                return self._answer(version, 0, INVALID_TOKEN), False
            return self._success(version, user, b"")
        try:
            if self.scram is None:
                self.scram = ScramMechanism(self.mechanism).make_server(self._auth_info)
                self.scram.set_client_first(token.decode())
                return self._answer(version, 0, self.scram.get_server_first().encode()), False
            self.scram.set_client_final(token.decode())
            return self._success(version, self.scram_user, self.scram.get_server_final().encode())
        except (ScramException, KeyError):        # KeyError: an unknown user
            if self.front.scram_failure_as_success:
                return self._answer(version, 0, b"e=invalid-proof", 60_000), False
            return self._failure(version)

    def _acls(self, version: int) -> DescribeAclsResponse:
        acls = self.front.acls
        if acls is None:
            return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                        error_message="No Authorizer is configured", resources=[])
        resource_cls = DescribeAclsResponse.DescribeAclsResource
        resources = [resource_cls(version=version, resource_type=rtype, resource_name=name, pattern_type=pattern,
                                  acls=[resource_cls.AclDescription(version=version, principal=principal, host=host,
                                                                    operation=op, permission_type=permission)])
                     for rtype, name, pattern, principal, host, op, permission in acls]
        return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=0, error_message=None,
                                    resources=resources)

    def _auth_info(self, user: str):
        self.scram_user = user
        return self.front._scram[(user, self.mechanism)]

    def _success(self, version: int, user: str, server_bytes: bytes):
        self.principal = f"User:{user}"
        self.front.logins.append(self.principal)
        lifetime = self.front.session_lifetime_ms
        self.expires = time.monotonic() + lifetime / 1000 if lifetime else None
        return self._answer(version, 0, server_bytes, lifetime), False

    def _failure(self, version: int):
        return self._answer(version, ErrorCode.SASL_AUTHENTICATION_FAILED, b""), True

    @staticmethod
    def _answer(version: int, code: int, auth_bytes: bytes, lifetime: int = 0):
        return response_class(ApiKey.SaslAuthenticate)(
            version=version, error_code=code, error_message="Authentication failed" if code else None,
            auth_bytes=auth_bytes, session_lifetime_ms=lifetime)
