"""Test security material and a raw Kafka connection that can log in.

- `TestPki`: a CA, a server certificate for 127.0.0.1/localhost and client certificates,
  made by `trustme` at test time and written as PEM files (librdkafka and kafkajs read files).
- `credentials_file`: a SCRAM credential file kgc's terminate mode reads.
- `ClientSecurity`: one client's security settings, translated per library.
- `KafkaSocket`: a blocking connection speaking kafka-python's codecs, with SASL PLAIN and
  SCRAM logins (scramp as the client): to drive kgc request by request.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from coordinator.security.credentials import credential_toml, make_credential
from protocol.messages import response_class

_SIZE = struct.Struct(">i")


def acl_file(path: Path, *bindings: dict) -> str:
    """A kgc ACL file: one [[acl]] table per dict (keys as the file spells them)."""
    tables = ["[[acl]]\n" + "".join(f'{key} = "{value}"\n' for key, value in binding.items())
              for binding in bindings]
    path.write_text("\n".join(tables))
    return str(path)


def allow(principal: str, operation: str, resource_type: str, name: str, pattern: str = "literal") -> dict:
    return {"principal": principal, "operation": operation, "permission": "allow", "resource_type": resource_type,
            "resource_name": name, "pattern_type": pattern}


def credentials_file(path: Path, users: dict[str, str], iterations: int = 4096) -> str:
    """Both SCRAM mechanisms for each user -> password (4096: the fastest Kafka accepts)."""
    path.write_text("\n".join(credential_toml(user, mechanism, make_credential(mechanism, password, iterations))
                              for user, password in users.items()
                              for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")))
    return str(path)


class TestPki:
    __test__ = False

    def __init__(self, directory: Path, organization: str = "kgc-test"):
        self.directory = directory
        self.ca = trustme.CA(organization_name=organization)
        self.ca_file = str(directory / "ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_file)
        self.server_cert, self.server_key = self.issue("server", "127.0.0.1", "localhost")

    def issue(self, name: str, *identities: str, common_name: str | None = None,
              organization_unit: str | None = None) -> tuple[str, str]:
        cert = self.ca.issue_cert(*(identities or (f"{name}.client.test",)), common_name=common_name,
                                  organization_unit_name=organization_unit)
        cert_file, key_file = str(self.directory / f"{name}.crt"), str(self.directory / f"{name}.key")
        # The chain, leaf first: what a server or client presents.
        Path(cert_file).write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
        cert.private_key_pem.write_to_path(key_file)
        return cert_file, key_file

    def server_context(self) -> ssl.SSLContext:
        """A server's TLS context presenting the server certificate (127.0.0.1, localhost)."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.server_cert, self.server_key)
        return ctx

    def client_context(self, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if cert is not None:
            ctx.load_cert_chain(*cert)
        return ctx


def unsecured_jwt(claims: dict, header: dict | None = None) -> str:
    """An unsigned JWT (`alg` none), as Kafka's and librdkafka's unsecured token builders make."""
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"              # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def confluent(self) -> dict:
        conf = {"security.protocol": self.protocol}
        if self.mechanism == "OAUTHBEARER":       # librdkafka's unsecured JWT, `sub` = the user
            conf.update({"sasl.mechanism": self.mechanism, "enable.sasl.oauthbearer.unsecure.jwt": True,
                         "sasl.oauthbearer.config": f"principal={self.username}"})
        elif self.mechanism:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        if self.ca_file:
            conf["ssl.ca.location"] = self.ca_file
        if self.cert_file:
            conf.update({"ssl.certificate.location": self.cert_file, "ssl.key.location": self.key_file})
        return conf

    def kafka_python(self) -> dict:
        conf = {"security_protocol": self.protocol}
        if self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        if self.ca_file:
            conf.update(ssl_cafile=self.ca_file, ssl_check_hostname=True)
        if self.cert_file:
            conf.update(ssl_certfile=self.cert_file, ssl_keyfile=self.key_file)
        return conf

    def java(self) -> dict[str, str]:
        """The Java client's properties; a client certificate as a PEM keystore (`java_keystore`)."""
        conf = {"security.protocol": self.protocol}
        if self.mechanism:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            conf |= {"sasl.mechanism": self.mechanism,
                     "sasl.jaas.config": f'{module} required username="{self.username}" password="{self.password}";'}
        if self.ca_file:
            conf |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file}
        if self.cert_file:
            conf |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": java_keystore(self.cert_file, self.key_file)}
        return conf

    def aiokafka(self) -> dict:
        conf = {"security_protocol": self.protocol}
        if self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.password)
        if self.ca_file:
            from aiokafka.helpers import create_ssl_context

            conf["ssl_context"] = create_ssl_context(cafile=self.ca_file, certfile=self.cert_file,
                                                     keyfile=self.key_file)
        return conf


def java_keystore(cert_file: str, key_file: str) -> str:
    """The key and its chain in one PEM file, beside the key, as Kafka's PEM keystore reads
    them: the key as PKCS#8, the only form it parses (trustme writes EC keys as SEC1)."""
    key = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
    path = Path(key_file).with_suffix(".java.pem")
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()) + Path(cert_file).read_bytes())
    return str(path)


class KafkaSocket:
    """One blocking client connection. `call` sends a kafka-python request and reads its answer."""

    def __init__(self, port: int, *, context: ssl.SSLContext | None = None, timeout_s: float = 5.0):
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.sock = context.wrap_socket(sock, server_hostname="127.0.0.1") if context else sock
        self._correlation_id = 0

    def __enter__(self) -> KafkaSocket:
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def send(self, request) -> int:
        self._correlation_id += 1
        request.with_header(correlation_id=self._correlation_id, client_id="kgc-test")
        self.sock.sendall(request.encode(header=True, framed=True))
        return self._correlation_id

    def send_until_closed(self, data: bytes) -> None:
        """Sends `data`, or what of it goes out before the server closes the connection: a
        test of that close expects it mid-send (over TLS the send then raises SSLEOFError)."""
        with contextlib.suppress(OSError):      # ssl.SSLError is an OSError
            self.sock.sendall(data)

    def receive(self, request):
        (size,) = _SIZE.unpack(self._read(_SIZE.size))
        return response_class(request.API_KEY).decode(self._read(size), version=request.API_VERSION, header=True)

    def call(self, request):
        self.send(request)
        return self.receive(request)

    def closed_by_peer(self) -> bool:
        """True when the server closed the connection (EOF or reset), within the timeout."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed by kgc")
            data += chunk
        return bytes(data)

    # ---- logins ---------------------------------------------------------------------

    def handshake(self, mechanism: str):
        return self.call(SaslHandshakeRequest[1](mechanism=mechanism))

    def authenticate(self, auth_bytes: bytes, version: int = 1):
        return self.call(SaslAuthenticateRequest[version](auth_bytes=auth_bytes))

    def login_plain(self, user: str, password: str, version: int = 1):
        handshake = self.handshake("PLAIN")
        assert handshake.error_code == 0, handshake
        return self.authenticate(b"\0" + user.encode() + b"\0" + password.encode(), version)

    def login_oauthbearer(self, token: str, authzid: str = ""):
        """As Kafka's client: an error JSON (error 0, server bytes) is acknowledged with ^A."""
        handshake = self.handshake("OAUTHBEARER")
        assert handshake.error_code == 0, handshake
        first = self.authenticate(f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode())
        if first.error_code or not first.auth_bytes:
            return first
        return self.authenticate(b"\x01")

    def login_scram(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512", version: int = 1):
        handshake = self.handshake(mechanism)
        assert handshake.error_code == 0, handshake
        client = ScramClient([mechanism], user, password)
        first = self.authenticate(client.get_client_first().encode(), version)
        if first.error_code:
            return first
        client.set_server_first(first.auth_bytes.decode())
        final = self.authenticate(client.get_client_final().encode(), version)
        if final.error_code == 0:
            client.set_server_final(final.auth_bytes.decode())   # raises unless kgc proved it knows the key
        return final

