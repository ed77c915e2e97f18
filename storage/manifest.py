"""What each closed segment of a partition must be, recorded when it closes.

A closed segment never changes after its roll, except by the cleaner's swap, so its
length, last offset and CRC-32 are recorded then, in `segments.manifest` beside the
segments, with the base offset of the segment that became active. Open checks every
closed segment against it, and the cleaner schedule checks again each pass, so damage
the batch CRCs cannot see is named instead of loaded: a closed segment truncated at a
batch boundary or emptied, one deleted (between two present ones, or the last), the
active segment deleted, or a file whose bytes changed.

Crash safety. The manifest is written to `segments.manifest.new`, fsynced and renamed
over the old one, so it is always whole. An entry may list several accepted states
(`None`: absent): the cleaner records both the old and the new state before its rename
(or the old one and absence before an unlink) and only the new one after, so a crash
between the two never looks like damage. A roll creates the new segment before it
records the old one as closed: a closed segment with no entry whose base offset is the
recorded active one is that roll, interrupted, and is recorded at open.

A data dir without a manifest (older kgc, or a copied Kafka log dir) gets one at its
first open, from what is on disk then.
"""

from __future__ import annotations

import json
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from storage.segment import READ_CHUNK_BYTES, SegmentIO

MANIFEST_NAME = "segments.manifest"
MANIFEST_NEW_SUFFIX = ".new"


@dataclass(frozen=True, slots=True)
class SegmentState:
    size: int
    last_offset: int
    crc32: int


def checksum(data: bytes | memoryview) -> int:
    return zlib.crc32(data)


def file_checksum(path: Path, size: int) -> int:
    """CRC-32 of the first `size` bytes of a file (fewer if it is shorter)."""
    crc = 0
    with open(path, "rb") as f:
        remaining = size
        while remaining > 0:
            chunk = f.read(min(READ_CHUNK_BYTES, remaining))
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
            remaining -= len(chunk)
    return crc


class Manifest:
    def __init__(self, directory: Path, io: SegmentIO):
        self.path = directory / MANIFEST_NAME
        self._io = io
        # The writer thread (roll) and the cleaner's thread both change it: one at a time.
        self._lock = threading.Lock()
        self.exists = False
        self.active_base: int | None = None
        # base offset -> the states the closed segment may be in (None: absent)
        self.closed: dict[int, tuple[SegmentState | None, ...]] = {}

    def load(self) -> Manifest:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return self
        # A manifest without an active segment was reset by `kgc repair`: record anew.
        self.exists = raw["active_base"] is not None
        self.active_base = raw["active_base"]
        self.closed = {int(base): tuple(None if s is None else SegmentState(**s) for s in states)
                       for base, states in raw["closed"].items()}
        return self

    def save(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        body = {"version": 1, "active_base": self.active_base,
                "closed": {str(base): [None if s is None else {"size": s.size, "last_offset": s.last_offset,
                                                               "crc32": s.crc32} for s in states]
                           for base, states in sorted(self.closed.items())}}
        new = self.path.with_name(self.path.name + MANIFEST_NEW_SUFFIX)
        if new.exists():
            self._io.unlink(new)
        self._io.write_file(new, json.dumps(body, indent=1).encode())
        self._io.replace(new, self.path)
        self._io.fsync_dir(self.path.parent)
        self.exists = True

    def state(self, base: int) -> SegmentState | None:
        """The one state recorded for a closed segment (None if not recorded)."""
        states = self.closed.get(base, ())
        return states[0] if len(states) == 1 else None

    def record(self, base: int, *states: SegmentState | None) -> None:
        with self._lock:
            self.closed[base] = states
            self._save()

    def forget(self, base: int) -> None:
        with self._lock:
            if self.closed.pop(base, None) is not None:
                self._save()

    def rolled(self, closed_base: int, state: SegmentState, active_base: int) -> None:
        with self._lock:
            self.closed[closed_base] = (state,)
            self.active_base = active_base
            self._save()

    def reopened(self, active_base: int) -> None:
        """The log was cut back to `active_base`, which takes appends again."""
        with self._lock:
            if self.active_base == active_base:
                return
            for base in [b for b in self.closed if b >= active_base]:
                del self.closed[base]
            self.active_base = active_base
            self._save()

