"""kgc checking SASL credentials itself (`sasl_mode = "terminate"`, SASL_PLAINTEXT) against a
credential file of two users, alice and bob."""

from __future__ import annotations

import contextlib

from coordinator.settings import ServerConfig
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.security import credentials_file

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


@contextlib.asynccontextmanager
async def sasl_kgc(tmp_path, **settings):
    config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, security_protocol="sasl_plaintext",
                          sasl_credentials_file=credentials_file(tmp_path / "users.toml", PASSWORDS),
                          sasl_failure_delay_ms=0, **settings)
    async with running_kgc(config) as app:
        yield app
