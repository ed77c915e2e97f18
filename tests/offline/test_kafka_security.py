"""`kgc audit --kafka-option` as kgc's own connections read it (coordinator/offline/kafka_security.py):
the Java client's TLS and SASL settings, and a clear refusal of what the live checks cannot
follow. The connections themselves are tested on the secured cluster (test_secured_audit.py)."""

from __future__ import annotations

import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from coordinator.gateway.login import UpstreamLogin
from coordinator.offline.kafka_security import UnsupportedSecurity, client_security
from tests.support.security import TestPki

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="audit" password="p\\"w";'


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return TestPki(tmp_path_factory.mktemp("pki"))


def test_plaintext_needs_nothing():
    assert client_security({}) == client_security({"security.protocol": "plaintext"})
    assert client_security({}).tls is None and client_security({}).login is None


def test_sasl_ssl_with_a_pem_truststore_and_scram(pki):
    security = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.jaas.config": JAAS, "ssl.truststore.type": "PEM",
                                "ssl.truststore.location": pki.ca_file})
    assert security.login == UpstreamLogin("SCRAM-SHA-512", "audit", 'p"w')
    assert security.tls.check_hostname and security.tls.verify_mode is ssl.CERT_REQUIRED
    # only the truststore is trusted, as in Java: its one CA
    assert len(security.tls.get_ca_certs()) == 1


def test_a_pkcs12_truststore_is_read_with_its_password(pki, tmp_path):
    ca = x509.load_pem_x509_certificate(pki.ca.cert_pem.bytes())
    store = tmp_path / "truststore.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], BestAvailableEncryption(b"s3")))
    security = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
                                "ssl.truststore.location": str(store), "ssl.truststore.password": "s3",
                                "ssl.endpoint.identification.algorithm": ""})
    assert len(security.tls.get_ca_certs()) == 1
    assert security.tls.check_hostname is False and security.login is None


@pytest.mark.parametrize(("options", "named"), [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI"),     # Java's default mechanism
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "ssl.truststore.type=JKS"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12", "ssl.keystore.type": "PKCS12"},
     "ssl.keystore.type"),
    ({"security.protocol": "SSL_SASL"}, "security.protocol=SSL_SASL"),
])
def test_what_the_live_checks_cannot_follow_is_refused_by_name(options, named):
    with pytest.raises(UnsupportedSecurity, match=named.replace(".", r"\.")):
        client_security(options)


def test_the_password_is_never_in_what_is_printed():
    security = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                "sasl.jaas.config": JAAS})
    assert 'p"w' not in repr(security) and "p\\\"w" not in repr(security)
