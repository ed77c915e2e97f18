"""Locks on the partitions of a data dir: one partition is written by one process at a time.

    <data_dir>/.lock      byte p: a POSIX record lock (`fcntl.lockf`) held by the process holding partition p

Kafka refuses a log dir another broker has open (its `.lock`); kgc does the same per
partition, so that processes may share a data dir, each holding partitions of its own,
while two never append to the same segments. The kernel drops a process's record locks
when it exits, however it exits (kill -9 included), so a lock is never left behind and
the file is never removed (removed under a running kgc, a second one would lock a new
file of that name). It stays empty, and its name matches no `__consumer_offsets-<p>`
directory, so nothing that lists a data dir's partitions sees it.

Locks are per process, not per file descriptor, and closing *any* descriptor of the file
drops *all* of that process's locks on it. So a process opens a data dir's `.lock` once
(`_LockFile`), shared by every holder in it (a store, a `kgc repair`), and closes it only
when the last of them has let go; nothing else in kgc may open that file. A second
holder in the same process asking for a partition the first holds is refused too, by
this module's own count, since the kernel would grant it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from storage.api import StorageError

LOCK_FILE = ".lock"

# Linux's `struct flock` (l_type, l_whence, l_start, l_len, l_pid, padded), for F_GETLK's
# answer: which process holds a byte. Elsewhere the layout differs and the pid is not asked.
_FLOCK = struct.Struct("hhqqi4x") if sys.platform == "linux" else None
_REFUSED = (errno.EACCES, errno.EAGAIN)


def partition_list(partitions: Iterable[int]) -> str:
    """'partition 7', 'partitions 0-49', 'partitions 3, 5-9': runs shown as ranges."""
    ordered = sorted(set(partitions))
    runs: list[list[int]] = []
    for p in ordered:
        if runs and runs[-1][1] == p - 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"partition{'s' if len(ordered) > 1 else ''} {text}"


class DataDirInUse(StorageError):
    """Partitions of the data dir are held by another process (or another store of this
    one): this one must not open them."""

    def __init__(self, data_dir: Path, elsewhere: Iterable[int], pids: Iterable[int] = (),
                 in_this_process: Iterable[int] = ()):
        self.data_dir = data_dir
        self.partitions = frozenset(elsewhere) | frozenset(in_this_process)
        self.pids = tuple(sorted(set(pids)))
        self.reason = self._reason(frozenset(elsewhere), frozenset(in_this_process))
        super().__init__(f"data dir {data_dir}: {self.reason}")

    def _reason(self, elsewhere: frozenset[int], in_this_process: frozenset[int]) -> str:
        parts = []
        if elsewhere:
            if len(self.pids) > 1:
                who = f"other kgc processes (pids {', '.join(map(str, self.pids))}) serve"
            else:
                who = "another kgc process" + (f" (pid {self.pids[0]})" if self.pids else "") + " serves"
            parts.append(f"{who} {partition_list(elsewhere)}")
        if in_this_process:
            parts.append(f"another store of this process holds {partition_list(in_this_process)}")
        return "; ".join(parts)


class _LockFile:
    """This process's one descriptor of a data dir's `.lock`, and the partitions locked through it."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        stat = os.fstat(self.fd)
        # The file's identity, which the open descriptor keeps from being reused: two paths
        # to one data dir share one descriptor.
        self.key = (stat.st_dev, stat.st_ino)
        self.spare_fds: list[int] = []    # opened in a race with another path to it: closed with fd
        self.held: set[int] = set()
        self.holders = 0

    def lock(self, partition: int) -> bool:
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, partition, os.SEEK_SET)
        except OSError as exc:
            if exc.errno in _REFUSED:
                return False
            raise
        return True

    def unlock(self, partition: int) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, partition, os.SEEK_SET)

    def holder(self, partition: int) -> int | None:
        """The pid of the process that holds `partition`, where the system says (None: it
        cannot say, or the holder let go since)."""
        if _FLOCK is None:
            return None
        try:
            query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, partition, 1, 0)
            answer = fcntl.fcntl(self.fd, fcntl.F_GETLK, query)
        except OSError:
            return None
        kind, _whence, _start, _length, pid = _FLOCK.unpack(answer)
        return pid if kind != fcntl.F_UNLCK and pid > 0 else None


_files: dict[tuple[int, int], _LockFile] = {}
_guard = threading.Lock()


def _forget_after_fork() -> None:
    # A forked child holds none of its parent's record locks (POSIX does not pass them on).
    global _guard
    _guard = threading.Lock()
    _files.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


class PartitionLocks:
    """The partitions of one data dir that one holder (a store, a repair) has locked;
    `release` (or the end of a `with`) lets them go."""

    def __init__(self, data_dir: Path, file: _LockFile, partitions: frozenset[int]):
        self.data_dir = data_dir
        self.partitions = partitions
        self._file: _LockFile | None = file

    def release(self) -> None:
        with _guard:
            file, self._file = self._file, None
            if file is None:
                return
            for p in self.partitions:
                file.unlock(p)
            file.held -= self.partitions
            file.holders -= 1
            _close_if_unused(file)

    def __enter__(self) -> PartitionLocks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def lock_partitions(data_dir: str | Path, partitions: Iterable[int]) -> PartitionLocks:
    """Locks every one of `partitions` of the (existing) data dir, or none: `DataDirInUse`
    names those another process or another holder of this one has."""
    data_dir = Path(data_dir)
    wanted = sorted(set(partitions))
    with _guard:
        file = _lock_file(data_dir / LOCK_FILE)
        here = [p for p in wanted if p in file.held]
        taken: list[int] = []
        elsewhere: list[int] = []
        try:
            for p in wanted:
                if p not in file.held:
                    (taken if file.lock(p) else elsewhere).append(p)
        except BaseException:
            _undo(file, taken)
            raise
        if here or elsewhere:
            pids = [pid for pid in map(file.holder, elsewhere) if pid is not None]
            _undo(file, taken)
            raise DataDirInUse(data_dir, elsewhere, pids, here)
        file.held.update(taken)
        file.holders += 1
        return PartitionLocks(data_dir, file, frozenset(taken))


def _lock_file(path: Path) -> _LockFile:
    """The lock file's one descriptor in this process, opened if it has none yet."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        pass
    else:
        known = _files.get((stat.st_dev, stat.st_ino))
        if known is not None:
            return known
    file = _LockFile(path)
    known = _files.setdefault(file.key, file)
    if known is not file:
        # Another path to a file this process holds locks on: closing the new descriptor
        # now would drop them.
        known.spare_fds.append(file.fd)
    return known


def _undo(file: _LockFile, taken: list[int]) -> None:
    for p in taken:
        file.unlock(p)
    _close_if_unused(file)


def _close_if_unused(file: _LockFile) -> None:
    # Closing the descriptor drops every lock this process has on the file: only once no
    # holder is left.
    if file.holders == 0:
        del _files[file.key]
        for fd in (file.fd, *file.spare_fds):
            os.close(fd)
