"""The TLS and SASL settings of `kgc audit --kafka-option` (the Java client's names, as
Spark's Kafka source takes them) for kgc's own connections to the same cluster: the live
checks (log start and end offsets) read the cluster the topic is read from, with the same
credentials.

Understood: `security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); the truststore as
`ssl.truststore.location` of type PEM or PKCS12 (`ssl.truststore.type`, `.password`), or
`ssl.truststore.certificates` (PEM text); a client certificate as a PEM
`ssl.keystore.location` (`ssl.keystore.type=PEM`, key and certificate in one file);
`ssl.endpoint.identification.algorithm` (empty: no host name check); `sasl.mechanism` PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512 with `username` and `password` from `sasl.jaas.config`.
Anything else that would change how a connection is made (a JKS store, GSSAPI, OAUTHBEARER)
is refused with the setting named, rather than tried and failed on the wire.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from coordinator.gateway.login import UpstreamLogin
from coordinator.security.tls import client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class UnsupportedSecurity(ValueError):
    """A setting the live checks cannot follow; the message names it."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    tls: ssl.SSLContext | None = None
    login: UpstreamLogin | None = None


PLAINTEXT = ClientSecurity()


def client_security(options: Mapping[str, str]) -> ClientSecurity:
    protocol = options.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise UnsupportedSecurity(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    tls = _tls(options) if protocol in ("SSL", "SASL_SSL") else None
    login = _login(options) if protocol.startswith("SASL_") else None
    return ClientSecurity(tls, login)


def _tls(options: Mapping[str, str]) -> ssl.SSLContext:
    check_hostname = options.get("ssl.endpoint.identification.algorithm", "https") != ""
    keystore = options.get("ssl.keystore.location")
    if keystore and options.get("ssl.keystore.type", "JKS").upper() != "PEM":
        raise UnsupportedSecurity("ssl.keystore.type: the live checks read a client certificate from a PEM file "
                                  "(ssl.keystore.type=PEM, key and certificate in ssl.keystore.location)")
    trusted = _truststore(options)
    if trusted is None:         # no truststore: the system's CAs, as Java's default one
        return client_context(None, keystore, keystore, check_hostname=check_hostname)
    # A truststore given is the only one trusted, as in Java.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = check_hostname
    ctx.load_verify_locations(cadata=trusted)
    if keystore:
        ctx.load_cert_chain(keystore, keystore)
    return ctx


def _truststore(options: Mapping[str, str]) -> str | None:
    """The trusted certificates, PEM; None when no truststore is set."""
    if "ssl.truststore.certificates" in options:
        return options["ssl.truststore.certificates"]
    location = options.get("ssl.truststore.location")
    if not location:
        return None
    store_type = options.get("ssl.truststore.type", "JKS").upper()
    if store_type == "PEM":
        return Path(location).read_text()
    if store_type == "PKCS12":
        return _pkcs12_certificates(location, options.get("ssl.truststore.password"))
    raise UnsupportedSecurity(f"ssl.truststore.type={store_type}: the live checks read PEM or PKCS12 truststores "
                              "(keytool -importkeystore -deststoretype PKCS12 converts a JKS one)")


def _pkcs12_certificates(location: str, password: str | None) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    store = pkcs12.load_pkcs12(Path(location).read_bytes(), password.encode() if password else None)
    certificates = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert else [])
    if not certificates:
        raise UnsupportedSecurity(f"ssl.truststore.location={location}: no certificate in the store")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)


def _login(options: Mapping[str, str]) -> UpstreamLogin:
    mechanism = options.get("sasl.mechanism", "GSSAPI").upper()
    if mechanism not in MECHANISMS:
        raise UnsupportedSecurity(f"sasl.mechanism={mechanism}: the live checks log in with "
                                  f"{', '.join(MECHANISMS)}")
    jaas = dict(_JAAS_OPTION.findall(options.get("sasl.jaas.config", "")))
    if "username" not in jaas:
        raise UnsupportedSecurity('sasl.jaas.config: no username="..." (and password="...") in it')
    return UpstreamLogin(mechanism, _unescape(jaas["username"]), _unescape(jaas.get("password", "")))


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)
