"""The SCRAM credential file `sasl_mode = "terminate"` checks clients against.

No password is stored: per user and mechanism the file holds what RFC 5802 calls the
salt, the iteration count, StoredKey and ServerKey (Kafka stores the same in its
`/config/users` entries). A TOML array of tables, written by `kgc scram-credential`:

    [[credential]]
    user = "alice"
    mechanism = "SCRAM-SHA-512"
    salt = "<base64>"
    iterations = 8192
    stored_key = "<base64>"
    server_key = "<base64>"

SCRAM is checked by `scramp`'s server, which needs only these keys. PLAIN is checked
against the same entries: the password is salted and hashed as SCRAM would
(PBKDF2, then HMAC "Client Key", then H) and compared with StoredKey, so one file serves
both and a PLAIN password never needs to be stored anywhere.

Unknown users get phantom credentials (a salt derived from a per-process secret and the
name, the real iteration count), so a SCRAM exchange for a user that does not exist runs
to its last step and fails there like a wrong password: the answers do not tell who
exists.

The file is read again when its modification time or size changes (checked at each new
authentication), so users are added or removed without a restart; a file that became
unreadable or invalid keeps the last good credentials and logs why.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import secrets
from dataclasses import dataclass
from types import MappingProxyType

from scramp import ScramMechanism

from coordinator.security.files import read_toml, stamp

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096                   # Kafka's ScramMechanism minimum
DEFAULT_ITERATIONS = 8192


class CredentialsError(ValueError):
    """The credential file cannot be used; the message names the file and the entry."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """What scramp's server asks of its `auth_fn`."""
        return self.salt, self.stored_key, self.server_key, self.iterations


Table = MappingProxyType  # (user, mechanism) -> ScramCredential, immutable once loaded


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialsError(f"unknown SCRAM mechanism {mechanism!r}: expected one of {', '.join(SCRAM_MECHANISMS)}")
    if iterations < MIN_ITERATIONS:
        raise CredentialsError(f"iterations must be at least {MIN_ITERATIONS}, got {iterations}")
    salt_, stored_key, server_key, i = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt)
    return ScramCredential(bytes(salt_), i, stored_key, server_key)


def credential_toml(user: str, mechanism: str, credential: ScramCredential) -> str:
    """One `[[credential]]` table, as `load_table` reads it."""
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")
    return (f'[[credential]]\nuser = "{_toml_escape(user)}"\nmechanism = "{mechanism}"\n'
            f'salt = "{b64(credential.salt)}"\niterations = {credential.iterations}\n'
            f'stored_key = "{b64(credential.stored_key)}"\nserver_key = "{b64(credential.server_key)}"\n')


def _toml_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def load_table(path: str) -> Table:
    document = read_toml(path, "credential file", CredentialsError)
    unknown = set(document) - {"credential"}
    if unknown:
        raise CredentialsError(f"credential file {path}: unknown key(s) {', '.join(sorted(unknown))}")
    table: dict[tuple[str, str], ScramCredential] = {}
    for n, entry in enumerate(document.get("credential", []), 1):
        where = f"credential file {path}, entry {n}"
        try:
            user, mechanism = entry["user"], entry["mechanism"]
            credential = ScramCredential(_b64(entry["salt"]), int(entry["iterations"]),
                                         _b64(entry["stored_key"]), _b64(entry["server_key"]))
        except KeyError as exc:
            raise CredentialsError(f"{where}: missing {exc.args[0]!r}") from None
        except (TypeError, ValueError, binascii.Error) as exc:
            raise CredentialsError(f"{where}: {exc}") from None
        if not isinstance(user, str) or not user:
            raise CredentialsError(f"{where}: user must be a non-empty string")
        if mechanism not in SCRAM_MECHANISMS:
            raise CredentialsError(f"{where}: mechanism must be one of {', '.join(SCRAM_MECHANISMS)}")
        if credential.iterations < MIN_ITERATIONS:
            raise CredentialsError(f"{where}: iterations must be at least {MIN_ITERATIONS}")
        if (user, mechanism) in table:
            raise CredentialsError(f"{where}: {user} has two {mechanism} entries")
        table[(user, mechanism)] = credential
    return MappingProxyType(table)


def _b64(value) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected base64 text, got {value!r}")
    return base64.b64decode(value, validate=True)


class CredentialStore:
    """The credentials of one file, reloaded when the file changes."""

    def __init__(self, path: str):
        self._path = path
        self._stamp = stamp(path)
        self._table = load_table(path)          # a bad file at start-up is an error
        self._secret = secrets.token_bytes(32)  # phantom salts: stable per process

    def _current(self) -> Table:
        now = stamp(self._path)
        if now is not None and now != self._stamp:
            self._stamp = now
            try:
                self._table = load_table(self._path)
                log.info("credential file %s reloaded: %d credentials", self._path, len(self._table))
            except CredentialsError as exc:
                log.error("keeping the previous credentials: %s", exc)
        return self._table

    def scram(self, user: str, mechanism: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's `auth_fn`: the user's keys, or phantom ones that no proof matches."""
        table = self._current()
        credential = table.get((user, mechanism))
        if credential is not None:
            return credential.auth_info()
        # The iteration count of the file's users: a different one would tell who does not exist.
        iterations = next((c.iterations for (_, m), c in table.items() if m == mechanism), DEFAULT_ITERATIONS)
        digest = hmac.digest(self._secret, f"{mechanism}\0{user}".encode(), "sha256")
        return digest[:16], digest[16:], secrets.token_bytes(32), iterations

    def check_plain(self, user: str, password: str) -> bool:
        """PLAIN against the user's SCRAM keys (the slow part is one PBKDF2: run it off the loop)."""
        table = self._current()
        for mechanism in reversed(SCRAM_MECHANISMS):
            credential = table.get((user, mechanism))
            if credential is not None:
                derived = make_credential(mechanism, password, credential.iterations, credential.salt)
                return hmac.compare_digest(derived.stored_key, credential.stored_key)
        return False
