"""`kgc scram-credential`: add, replace or delete a user's SCRAM credentials in the file
`sasl_credentials_file` names. The password is read from standard input (or prompted for
twice on a terminal) and never stored: only salt, iterations, StoredKey and ServerKey.
The file is rewritten atomically with mode 0600; a running kgc picks the change up at
the next authentication."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import tempfile

from coordinator.security.credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialsError,
    credential_toml,
    load_table,
    make_credential,
)


def add_credentials_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("scram-credential", help="add or delete a user in a SCRAM credential file",
                              description=__doc__)
    p.add_argument("--file", required=True, help="the credential file (created if missing)")
    p.add_argument("--user", required=True, help="the user name")
    p.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS,
                   help="SCRAM mechanism (repeatable; default: both)")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help="PBKDF2 iterations of new credentials (default %(default)s)")
    p.add_argument("--delete", action="store_true", help="remove the user's credentials instead")
    p.set_defaults(handler=run_credentials)
    return p


def _password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise CredentialsError("the passwords differ")
    return first


def run_credentials(args: argparse.Namespace) -> int:
    mechanisms = tuple(args.mechanism or SCRAM_MECHANISMS)
    try:
        table = dict(load_table(args.file)) if os.path.exists(args.file) else {}
        for mechanism in mechanisms:
            table.pop((args.user, mechanism), None)
        if not args.delete:
            password = _password()
            if not password:
                raise CredentialsError("empty password")
            for mechanism in mechanisms:
                table[(args.user, mechanism)] = make_credential(mechanism, password, args.iterations)
    except CredentialsError as exc:
        print(f"kgc scram-credential: {exc}", file=sys.stderr)
        return 2
    text = "\n".join(credential_toml(user, mechanism, credential)
                     for (user, mechanism), credential in sorted(table.items()))
    directory = os.path.dirname(os.path.abspath(args.file))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kgc-credentials-")   # mkstemp: mode 0600
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, args.file)
    print(f"{'deleted' if args.delete else 'wrote'} {args.user} ({', '.join(mechanisms)}) in {args.file}")
    return 0
