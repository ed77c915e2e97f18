"""The disk's own fsync time, measured beside a workload so both see the same machine.

A commit under `--fsync always` waits for at least one fsync of a small append; this is
that floor: append `APPEND_BYTES` to a fresh file in the given directory and fsync it,
`count` times, each timed alone. On a shared disk this time moves with everyone else's
writes (from 0.1 to several ms within minutes here), so a workload times it right before
and after the runs it compares with it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from coordinator.bench.stats import Latencies

APPEND_BYTES = 150    # about one small OffsetCommit batch


def fsync_latencies(directory: Path, count: int = 300, into: Latencies | None = None) -> Latencies:
    """The fsync times, added to `into` when given (to pool probes taken around a run)."""
    latencies = into if into is not None else Latencies()
    fd, name = tempfile.mkstemp(prefix="fsync-probe-", dir=directory)
    try:
        data = b"x" * APPEND_BYTES
        for _ in range(count):
            started = time.perf_counter_ns()
            os.write(fd, data)
            os.fsync(fd)
            latencies.add(time.perf_counter_ns() - started)
    finally:
        os.close(fd)
        os.unlink(name)
    return latencies
