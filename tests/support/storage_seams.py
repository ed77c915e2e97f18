"""SegmentIO seams for storage tests: count the disk operations, or make one fail."""

from __future__ import annotations

import errno
from collections import Counter

from storage.segment import SegmentIO


class CountingIO(SegmentIO):
    """Counts every operation, and records the order of writes and fsyncs (an fdatasync
    is an "fsync" there, and counted apart as "fdatasync" too)."""

    def __init__(self):
        self.counts: Counter[str] = Counter()
        self.events: list[str] = []

    def _note(self, name: str) -> None:
        self.counts[name] += 1
        self.events.append(name)

    def write(self, fd, data, position):
        self._note("write")
        super().write(fd, data, position)

    def fsync(self, fd):
        self._note("fsync")
        super().fsync(fd)

    def fdatasync(self, fd):
        # A sync of the file's data like fsync, for every test that counts or orders syncs;
        # counted apart too.
        self._note("fsync")
        self.counts["fdatasync"] += 1
        super().fdatasync(fd)

    def fsync_dir(self, path):
        self._note("fsync_dir")
        super().fsync_dir(path)

    def replace(self, source, target):
        self._note("replace")
        super().replace(source, target)

    def write_file(self, path, data):
        self._note("write_file")
        super().write_file(path, data)


class FailingIO(CountingIO):
    """Fails the next `op` armed with `fail_next(op)` with `error` (default ENOSPC); a
    failing write first lets `partial` bytes through, as a filling disk does."""

    def __init__(self):
        super().__init__()
        self._armed: dict[str, tuple[OSError, int]] = {}

    def fail_next(self, op: str, error: OSError | None = None, partial: int = 0) -> None:
        self._armed[op] = (error or OSError(errno.ENOSPC, "No space left on device"), partial)

    def _maybe_fail(self, op: str) -> None:
        armed = self._armed.pop(op, None)
        if armed is not None:
            raise armed[0]

    def write(self, fd, data, position):
        armed = self._armed.pop("write", None)
        if armed is not None:
            error, partial = armed
            if partial:
                super().write(fd, memoryview(data)[:partial], position)
            raise error
        super().write(fd, data, position)

    def fsync(self, fd):
        self._maybe_fail("fsync")
        super().fsync(fd)

    def fdatasync(self, fd):
        self._maybe_fail("fsync")        # `fail_next("fsync")` fails the next sync of either kind
        super().fdatasync(fd)

    def fsync_dir(self, path):
        self._maybe_fail("fsync_dir")
        super().fsync_dir(path)

    def replace(self, source, target):
        self._maybe_fail("replace")
        super().replace(source, target)

    def write_file(self, path, data):
        self._maybe_fail("write_file")
        super().write_file(path, data)
