"""OAUTHBEARER in passthrough: the principal is the configured claim of the client's JWT,
read from the RFC 7628 initial response as Kafka's grammar reads it."""

from __future__ import annotations

import base64

import pytest

from coordinator.net.passthrough import OAuthBearerError, oauthbearer_user
from coordinator.settings import ConfigError, load_config
from tests.support.security import unsecured_jwt


def message(token: str, authzid: str = "", extra: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01{extra}auth=Bearer {token}\x01\x01".encode()


ALICE = unsecured_jwt({"sub": "alice", "upn": "alice@corp", "exp": 4_000_000_000})


@pytest.mark.parametrize("raw, claim, user", [
    (message(ALICE), "sub", "alice"),
    (message(ALICE), "upn", "alice@corp"),                                   # the configured claim
    (message(ALICE, authzid="alice"), "sub", "alice"),
    (message(ALICE, extra="host=kgc\x01port=9092\x01"), "sub", "alice"),     # other RFC 7628 pairs
    (message(ALICE).replace(b"Bearer", b"bearer"), "sub", "alice"),
    (message(unsecured_jwt({"sub": "bob"}, {"alg": "RS256"}) + "c2ln"), "sub", "bob"),   # signed: not checked
])
def test_the_principal_is_the_configured_claim(raw, claim, user):
    assert oauthbearer_user(raw, claim) == user


@pytest.mark.parametrize("raw, claim, why", [
    (message(ALICE), "email", "no 'email' claim"),
    (message(unsecured_jwt({"sub": 7})), "sub", "no 'sub' claim"),
    (message(unsecured_jwt({"sub": " "})), "sub", "no 'sub' claim"),
    (message(ALICE, authzid="bob"), "sub", "authzid differs"),
    (message("abc.def"), "sub", "not a JWT"),
    (message("a.!!!.c"), "sub", "no auth=Bearer"),              # not a token character
    (message("eyJhbGciOiJub25lIn0.bm90IGpzb24."), "sub", "not base64url-encoded JSON"),
    (message("a." + base64.urlsafe_b64encode(b"[1]").decode().rstrip("=") + "."), "sub", "no 'sub' claim"),
    (message(ALICE).replace(b"auth=", b"token="), "sub", "no auth=Bearer"),
    (message(ALICE).replace(b"Bearer", b"Basic"), "sub", "no auth=Bearer"),
    (b"n,,auth=Bearer x.y.z\x01\x01", "sub", "RFC 7628"),        # no separator after the header
    (message(ALICE)[:-1], "sub", "RFC 7628"),                   # unterminated
    (b"\x01", "sub", "RFC 7628"), (b"\xff", "sub", "RFC 7628"),
])
def test_a_token_without_a_readable_claim_is_refused_with_the_reason(raw, claim, why):
    with pytest.raises(OAuthBearerError, match=why):
        oauthbearer_user(raw, claim)


def test_oauthbearer_is_a_passthrough_mechanism_only(tmp_path):
    passthrough = {"security_protocol": "sasl_plaintext", "sasl_mode": "passthrough", "upstream": "k:9093",
                   "sasl_passthrough_insecure_upstream": "true",
                   "sasl_mechanisms": "OAUTHBEARER,PLAIN", "sasl_oauthbearer_sub_claim_name": "upn"}
    credentials = tmp_path / "credentials.toml"
    credentials.write_text("")
    terminate = {"security_protocol": "sasl_plaintext", "sasl_credentials_file": str(credentials),
                 "sasl_mechanisms": "OAUTHBEARER"}
    with pytest.raises(ConfigError, match="terminate does not support OAUTHBEARER"):
        load_config(terminate, {})
    config = load_config(passthrough, {}).config
    assert (config.sasl_mechanisms, config.sasl_oauthbearer_sub_claim_name) == (("OAUTHBEARER", "PLAIN"), "upn")
