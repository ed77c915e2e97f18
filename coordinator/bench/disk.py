"""The disk's own fsync time, measured beside a workload so both see the same machine.

A commit under `--fsync always` waits for at least one fsync of a small append; this is
that floor: append `APPEND_BYTES` to a file and fsync it, `count` times, each timed
alone. The file is made once (`FsyncProbe`) and kept: creating or deleting a file
between probes would put that metadata into the journal commit each fsync waits for,
which no commit of kgc's pays. On a shared disk this time moves with everyone else's
writes (from 0.1 to several ms within minutes here), so a workload times it right
before and after the runs it compares with it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from coordinator.bench.stats import Latencies

APPEND_BYTES = 150    # about one small OffsetCommit batch


class FsyncProbe:
    def __init__(self, directory: Path):
        self._fd, self._name = tempfile.mkstemp(prefix="fsync-probe-", dir=directory)
        os.fsync(self._fd)

    def latencies(self, count: int = 300, into: Latencies | None = None) -> Latencies:
        """The fsync times, added to `into` when given (to pool probes taken around a run)."""
        latencies = into if into is not None else Latencies()
        data = b"x" * APPEND_BYTES
        for _ in range(count):
            started = time.perf_counter_ns()
            os.write(self._fd, data)
            os.fsync(self._fd)
            latencies.add(time.perf_counter_ns() - started)
        return latencies

    def close(self) -> None:
        os.close(self._fd)
        os.unlink(self._name)

    def __enter__(self) -> FsyncProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
