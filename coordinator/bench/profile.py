"""Sampling kgc while a workload runs, with py-spy, and reading the samples back.

`Profiler` attaches `py-spy record --pid` (raw collapsed stacks, non-blocking, so the
target is not paused) to a kgc child and stops it with SIGINT, which makes py-spy write
its file. `hot_spots` folds the samples of one workload into the functions that hold the
CPU: by self time (the frame on top of the stack) and by inclusive time (anywhere on it).
py-spy leaves out samples of idle threads (the event loop waiting in epoll), so shares
are of busy time; the busy fraction of the wall time comes from how long py-spy ran,
which `Profiler` writes beside its output (`<output>.seconds`). Frames below the event
loop's run call (interpreter start-up, `main`) are on every stack and are left out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SAMPLE_RATE_HZ = 250
_REPO = f"{Path(__file__).resolve().parents[2]}/"
# Where a thread's own work starts, and what a sample that stops there is spent on.
_ENTRIES = {
    "run (asyncio/runners.py)": "[event loop itself: uvloop's C code, socket I/O, scheduling]",
    "_worker (concurrent/futures/thread.py)": "[thread pool worker: queue hand-off, GIL wait]",
}
_LIBRARY_PREFIX = re.compile(r"^.*/(site-packages|lib/python3\.\d+)/")
STOP_TIMEOUT_S = 20.0


def py_spy_binary() -> str | None:
    beside_python = Path(sys.executable).parent / "py-spy"
    return str(beside_python) if beside_python.exists() else shutil.which("py-spy")


class Profiler:
    def __init__(self, pid: int, output: Path):
        self.output = output
        self._started = time.monotonic()
        binary = py_spy_binary()
        if binary is None:
            raise RuntimeError("py-spy is not installed (the dev extra has it)")
        self._process = subprocess.Popen(
            [binary, "record", "--pid", str(pid), "--format", "raw", "--output", str(output),
             "--rate", str(SAMPLE_RATE_HZ), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    async def stop(self) -> None:
        if self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGINT)
            try:
                await asyncio.to_thread(self._process.wait, STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("py-spy (pid %d) did not stop: killing it", self._process.pid)
                os.kill(self._process.pid, signal.SIGKILL)
                await asyncio.to_thread(self._process.wait, STOP_TIMEOUT_S)
        self.output.with_suffix(".seconds").write_text(f"{time.monotonic() - self._started:.3f}\n")


@dataclass(frozen=True)
class HotSpots:
    samples: int
    seconds: float
    self_time: list[tuple[str, int]]
    inclusive: list[tuple[str, int]]


def _function(frame: str) -> str:
    """'handle (coordinator/net/connection.py:88)' -> 'handle (coordinator/net/connection.py)'."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    path = _LIBRARY_PREFIX.sub("", path.replace(_REPO, ""))
    return f"{name} ({path})"


def _below_entry(functions: list[str]) -> list[str]:
    """The frames above the event loop's (or a pool thread's) run frame; a sample with
    nothing above it is time inside that machinery itself, named as such."""
    for i in range(len(functions) - 1, -1, -1):
        entry = _ENTRIES.get(functions[i])
        if entry is not None:
            return functions[i + 1:] or [entry]
    return functions


def hot_spots(files: list[Path], top: int = 15) -> HotSpots:
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    samples = 0
    seconds = 0.0
    for file in files:
        sidecar = file.with_suffix(".seconds")
        if sidecar.exists():
            seconds += float(sidecar.read_text())
        for line in file.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [f for f in stack.split(";") if " (" in f]
            if not frames:
                continue
            samples += count
            functions = _below_entry([_function(f) for f in frames])
            self_counts[functions[-1]] += count
            for function in set(functions):
                inclusive[function] += count
    return HotSpots(samples, seconds, self_counts.most_common(top), inclusive.most_common(top))


def render(workload: str, spots: HotSpots) -> str:
    busy = spots.samples
    if busy <= 0:
        return f"{workload}: no busy samples"
    utilization = f", busy {100 * busy / (SAMPLE_RATE_HZ * spots.seconds):.0f}% of {spots.seconds:.0f} s" \
        if spots.seconds else ""
    lines = [f"**{workload}**: {busy} busy samples at {SAMPLE_RATE_HZ} Hz{utilization}; shares of busy samples:",
             "", "| self | function | | inclusive | function |", "|---:|---|---|---:|---|"]
    for (self_fn, self_n), (inc_fn, inc_n) in zip(spots.self_time, spots.inclusive, strict=False):
        lines.append(f"| {100 * self_n / busy:.1f}% | `{self_fn}` | | {100 * inc_n / busy:.1f}% | `{inc_fn}` |")
    return "\n".join(lines)
