"""The disk's own fsync time, measured beside a workload so both see the same machine.

A commit under `--fsync always` waits for at least one fsync of a small append; this is
that floor: append `APPEND_BYTES` to a file and fsync it, `count` times, each timed
alone. With `writers` > 1 that many threads append and fsync the one file at once, as
that many clients' synchronous commits to one group's partition do: the disk then
serializes their flushes, so each waits longer than a lone one, whoever issues them. The file is made once (`FsyncProbe`) and kept: creating or deleting a file
between probes would put that metadata into the journal commit each fsync waits for,
which no commit of kgc's pays. On a shared disk this time moves with everyone else's
writes (from 0.1 to several ms within minutes here), so a workload times it right
before and after the runs it compares with it.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from coordinator.bench.stats import Latencies

APPEND_BYTES = 150    # about one small OffsetCommit batch


class FsyncProbe:
    def __init__(self, directory: Path):
        self._fd, self._name = tempfile.mkstemp(prefix="fsync-probe-", dir=directory)
        os.fsync(self._fd)

    def latencies(self, count: int = 300, into: Latencies | None = None, writers: int = 1) -> Latencies:
        """The fsync times, added to `into` when given (to pool probes taken around a run);
        `count` in all, shared among `writers` threads appending at once."""
        latencies = into if into is not None else Latencies()
        timed: list[list[int]] = [[] for _ in range(writers)]
        threads = [threading.Thread(target=self._append_and_fsync, args=(count // writers, times))
                   for times in timed]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for times in timed:
            for ns in times:
                latencies.add(ns)
        return latencies

    def _append_and_fsync(self, count: int, times: list[int]) -> None:
        data = b"x" * APPEND_BYTES
        for _ in range(count):
            started = time.perf_counter_ns()
            os.write(self._fd, data)
            os.fsync(self._fd)
            times.append(time.perf_counter_ns() - started)

    def close(self) -> None:
        os.close(self._fd)
        os.unlink(self._name)

    def __enter__(self) -> FsyncProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
