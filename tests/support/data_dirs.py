"""Data dirs as kgc leaves them, and as an operator can spoil them: files kgc may read but
not write (a restored backup owned by another user, a volume mounted read-only)."""

from __future__ import annotations

import asyncio
import ctypes
import os
from pathlib import Path

from storage.file_store import FileLogStore, partition_dir

# prctl(2) and capabilities(7): drop a capability from the bounding set, which is all a
# program exec'd by root keeps of root's powers.
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1


def made_by_kgc(path: Path) -> Path:
    """What a first `kgc serve --data-dir PATH` leaves: 50 partitions, each with its manifest."""
    async def open_and_close() -> None:
        store = FileLogStore(path, fsync="never")
        await store.open()
        await store.close()
    asyncio.run(open_and_close())
    return path


def make_read_only(path: Path) -> None:
    for directory, _, files in os.walk(path):
        for name in files:
            os.chmod(Path(directory) / name, 0o444)
        os.chmod(directory, 0o555)


def make_writable(path: Path) -> None:
    """So the test's own clean-up may remove it."""
    for directory, _, _ in os.walk(path):
        os.chmod(directory, 0o755)


def read_only_partitions(data_dir: Path, partitions) -> None:
    for p in partitions:
        make_read_only(partition_dir(data_dir, p))


def bound_by_file_modes() -> dict:
    """Popen arguments under which file modes bind the child: root writes whatever the modes
    say, so a child of root first gives up that power (CAP_DAC_OVERRIDE)."""
    return {"preexec_fn": _without_dac_override} if os.geteuid() == 0 else {}


def _without_dac_override() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")
