"""Noticing that a file kgc reads (credentials, ACLs, certificates) was replaced."""

from __future__ import annotations

import os
import tomllib

Stamp = tuple[int, int] | None


def stamp(path: str | None) -> Stamp:
    """(modification time, size), or None for no path or a file that cannot be read now."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def read_toml(path: str, what: str, error: type[Exception]) -> dict:
    """The TOML document of `path`; `error` (naming `what` and the file) if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} {path} is not valid TOML: {exc}") from None
