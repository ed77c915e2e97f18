"""Segment files and the one object that touches the disk for writes.

A segment is `<20-digit base offset>.log` in a partition directory, holding whole
batches (see `storage.format`); its base offset is at most the first batch's base
offset and above every offset of the segment before it. Beside it may lie:

- `<segment>.torn-<N>`: bytes recovery cut off a torn tail, kept as evidence (N counts
  from 1 and never reuses a number);
- `<segment>.cleaned`: a compacted copy being written; never loaded, removed on open;
- `<segment>.swap`: a complete replacement (Kafka's cleaner leaves these in a copied
  Kafka log dir); open finishes the swap.

`SegmentIO` performs every write, fsync, truncate, rename and unlink of the store, so a
test can count fsyncs or make one fail (ZODB's swappable `_finish_finish`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOG_SUFFIX = ".log"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TORN_SUFFIX = ".torn-"
READ_CHUNK_BYTES = 4 * 2**20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


@contextlib.contextmanager
def mapped(path: Path) -> Iterator[mmap.mmap | bytes]:
    """A read-only map of a whole file (an empty file, which cannot be mapped, gives b"")."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            yield m


class SegmentIO:
    """Writes, fsyncs and renames for the store; subclass it in tests to count or fail."""

    def open_segment(self, path: Path) -> int:
        """The segment for writing at explicit positions (`write`), created if absent. Not
        O_APPEND: the active segment may be longer than its log (a preallocated tail)."""
        # 0600 (and 0700 directories): the log holds member and client ids, hosts and offsets.
        return os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)

    def write(self, fd: int, data: bytes | memoryview, position: int) -> None:
        _pwrite_all(fd, data, position)

    def preallocate(self, fd: int, position: int, size: int) -> None:
        """`size` zero bytes at `position`: written, not `fallocate`d, because writing
        into an unwritten extent changes metadata that the next sync must commit."""
        _pwrite_all(fd, bytes(size), position)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def replace(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def write_file(self, path: Path, data: bytes | memoryview) -> None:
        """A new file holding `data`, fsynced; fails if `path` exists (evidence is never
        overwritten)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            self.write(fd, data, 0)
            self.fsync(fd)
        finally:
            os.close(fd)


def _pwrite_all(fd: int, data: bytes | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        # os.pwrite may write less than asked (a full disk, a signal); never leave a
        # batch half-written while thinking it whole.
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


@dataclass(slots=True, eq=False)     # identity: the same file is the same segment
class Segment:
    path: Path
    base_offset: int
    size: int                    # bytes of whole, known-good batches
