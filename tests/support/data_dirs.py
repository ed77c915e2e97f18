"""Data dirs as kgc leaves them, and as an operator can spoil them: files kgc may read but
not write (a restored backup owned by another user, a volume mounted read-only), or
partitions another process holds."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
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


# A store of some partitions, open in another process until its stdin has a line: the
# partitions' locks are per process, so a test cannot hold them against itself.
_HOLDER = """
import asyncio, os, sys
from storage.file_store import FileLogStore

async def main():
    store = FileLogStore(sys.argv[1], fsync="never", partitions=map(int, sys.argv[2].split(",")))
    await store.open()
    print("held", os.getpid(), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await store.close()
    print("released", flush=True)

asyncio.run(main())
"""
HOLDER_WAIT_S = 30


class PartitionHolder:
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.pid = proc.pid
        self._stderr: str | None = None

    def line(self) -> str:
        """The child's next line ('' once it exited), waited for within a bound."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], HOLDER_WAIT_S)
        assert ready, f"the holder (pid {self.pid}) said nothing for {HOLDER_WAIT_S} s"
        return self.proc.stdout.readline()

    def release(self) -> None:
        """Close the store (its locks go with it) and exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.line() == "released\n"
        self.proc.wait(HOLDER_WAIT_S)

    def kill(self) -> str:
        """SIGKILL, as a crash: no close, no clean-up. Returns what the child wrote to stderr."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        if self._stderr is None:
            _, self._stderr = self.proc.communicate(timeout=HOLDER_WAIT_S)
        return self._stderr


@contextlib.contextmanager
def partitions_held(data_dir: Path, partitions: Iterable[int]) -> Iterator[PartitionHolder]:
    """A child process with a `FileLogStore` of `partitions` open on `data_dir`; killed at the end."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(data_dir), ",".join(map(str, partitions))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder = PartitionHolder(proc)
    try:
        line = holder.line()
        if line != f"held {proc.pid}\n":
            raise AssertionError(f"the holder did not open its store: {line!r} {holder.kill()}")
        yield holder
    finally:
        holder.kill()


_TRY_LOCK = """
import sys
from storage.dir_lock import DataDirInUse, lock_partitions
try:
    lock_partitions(sys.argv[1], map(int, sys.argv[2].split(","))).release()
except DataDirInUse as exc:
    print(exc)
else:
    print("locked")
"""


def lock_elsewhere(data_dir: Path, partitions: Iterable[int]) -> str:
    """What another process is told when it locks `partitions` (and lets go at once):
    'locked', or the refusal."""
    done = subprocess.run([sys.executable, "-c", _TRY_LOCK, str(data_dir), ",".join(map(str, partitions))],
                          capture_output=True, text=True, timeout=HOLDER_WAIT_S)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
