"""kgc's version, as installed (`kgc --version`, the kgc_build_info metric)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def kgc_version() -> str:
    try:
        return version("kgc")
    except PackageNotFoundError:   # run from a source tree that was never installed
        return "unknown"
