"""The SCRAM credential file: keys only, PLAIN checked against them, phantom users, bad
files named, the `kgc scram-credential` command, and the settings that need the file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from scramp import ScramClient, ScramException, ScramMechanism

from coordinator.security.credentials import CredentialsError, CredentialStore, load_table
from coordinator.settings import ConfigError, load_config
from tests.support.security import credentials_file


@pytest.fixture
def store(tmp_path):
    return CredentialStore(credentials_file(tmp_path / "users.toml", {"alice": "s3cret"}))


def scram_login(store: CredentialStore, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    server = ScramMechanism(mechanism).make_server(lambda name: store.scram(name, mechanism))
    client = ScramClient([mechanism], user, password)
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())


def test_no_password_is_stored(tmp_path, store):
    assert "s3cret" not in (tmp_path / "users.toml").read_text()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_succeeds_with_the_password_only(store, mechanism):
    scram_login(store, "alice", "s3cret", mechanism)
    with pytest.raises(ScramException):
        scram_login(store, "alice", "wrong", mechanism)


def test_unknown_users_fail_at_the_proof_with_stable_phantom_salts(store):
    assert store.scram("nobody", "SCRAM-SHA-512")[0] == store.scram("nobody", "SCRAM-SHA-512")[0]
    assert store.scram("nobody", "SCRAM-SHA-512")[3] == store.scram("alice", "SCRAM-SHA-512")[3]
    with pytest.raises(ScramException):
        scram_login(store, "nobody", "s3cret")


def test_plain_is_checked_against_the_scram_keys(store):
    assert store.check_plain("alice", "s3cret")
    assert not store.check_plain("alice", "s3cret ")
    assert not store.check_plain("nobody", "s3cret")


@pytest.mark.parametrize("text, error", [
    ('[[credential]]\nuser = "a"\n', "missing 'mechanism'"),
    ('[[credential]]\nuser = "a"\nmechanism = "MD5"\nsalt = ""\niterations = 4096\nstored_key = ""\n'
     'server_key = ""\n', "mechanism must be one of"),
    ('[[credential]]\nuser = "a"\nmechanism = "SCRAM-SHA-256"\nsalt = "!!"\niterations = 4096\n'
     'stored_key = ""\nserver_key = ""\n', "entry 1"),
    ('[[credential]]\nuser = "a"\nmechanism = "SCRAM-SHA-256"\nsalt = ""\niterations = 10\n'
     'stored_key = ""\nserver_key = ""\n', "at least 4096"),
    ('users = 1\n', "unknown key"),
    ('not toml', "not valid TOML"),
])
def test_a_bad_file_is_refused_with_its_name_and_entry(tmp_path, text, error):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(CredentialsError, match=error) as raised:
        load_table(str(path))
    assert str(path) in str(raised.value)


def test_a_broken_file_keeps_the_last_good_credentials(tmp_path, store):
    path = tmp_path / "users.toml"
    path.write_text("garbage")
    os.utime(path, ns=(1, 1))
    assert store.check_plain("alice", "s3cret")


def test_the_command_writes_a_private_file_and_deletes_users(tmp_path):
    path = tmp_path / "users.toml"
    kgc = [sys.executable, "-m", "coordinator", "scram-credential", "--file", str(path)]
    subprocess.run([*kgc, "--user", "alice"], input="pw-a\n", text=True, check=True, capture_output=True)
    subprocess.run([*kgc, "--user", "bob", "--mechanism", "SCRAM-SHA-256"], input="pw-b\n", text=True,
                   check=True, capture_output=True)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(load_table(str(path))) == [("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512"),
                                             ("bob", "SCRAM-SHA-256")]
    assert CredentialStore(str(path)).check_plain("bob", "pw-b")
    subprocess.run([*kgc, "--user", "alice", "--delete"], check=True, capture_output=True)
    assert sorted(load_table(str(path))) == [("bob", "SCRAM-SHA-256")]


def test_settings_that_contradict_each_other_are_refused_at_start(tmp_path):
    with pytest.raises(ConfigError, match="needs sasl_credentials_file"):
        load_config({"security_protocol": "sasl_plaintext", "standalone": "true"}, {})
    users = credentials_file(tmp_path / "users.toml", {"alice": "x"})
    with pytest.raises(ConfigError, match="no listener uses SASL"):
        load_config({"sasl_credentials_file": users, "standalone": "true"}, {})
    with pytest.raises(ConfigError, match="bad sasl_mechanisms"):
        load_config({"sasl_mechanisms": "PLAIN,GSSAPI"}, {})
    loaded = load_config({"security_protocol": "sasl_plaintext", "sasl_credentials_file": users,
                          "standalone": "true"}, {})
    assert loaded.config.sasl
