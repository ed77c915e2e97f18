"""The CPU a target spends per request in a workload's measured window, from /proc.

Where a workload is bound by the cores, its rate alone does not say whether a target does
more work per request or only spreads its work over fewer cores: kgc runs one group's
requests on one event loop, Kafka over its network and handler threads. CPU per request
says which. It counts the target's process and every process below it (`processes = N`
starts children, a launcher script starts the JVM), user and system time alike, so the
kernel's share of a request (socket reads and writes) is in it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import NamedTuple

from coordinator.bench.stats import Figure, not_measured

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name, which may hold spaces."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    return text[text.rindex(")") + 2:].split()


def _tree(root: int) -> list[int]:
    """`root` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            parent = int(_stat_fields(int(entry.name))[1])
        except (OSError, ValueError, IndexError):
            continue        # exited while we read
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


class Cpu(NamedTuple):
    """CPU seconds, in user space and in the kernel."""

    user: float
    system: float

    @property
    def total(self) -> float:
        return self.user + self.system

    def __sub__(self, earlier: tuple[float, ...]) -> Cpu:
        return Cpu(self.user - earlier[0], self.system - earlier[1])


def cpu_seconds(pid: int) -> Cpu:
    """The CPU spent so far by `pid` and the live processes below it."""
    user = system = 0
    for member in _tree(pid):
        try:
            fields = _stat_fields(member)
        except OSError:
            continue        # exited while we read
        user += int(fields[11])
        system += int(fields[12])
    return Cpu(user / _TICKS_PER_S, system / _TICKS_PER_S)


async def cpu_in_window(pid: int | None, measure_from: float, end: float) -> Cpu | None:
    """The CPU `pid`'s tree spends between the `time.perf_counter` instants `measure_from`
    and `end`; None when the pid is unknown. Run it beside the workload's clients (it
    sleeps until each instant)."""
    if pid is None:
        return None
    await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
    before = cpu_seconds(pid)
    await asyncio.sleep(max(0.0, end - time.perf_counter()))
    return cpu_seconds(pid) - before


def per_request(metric: str, cpu: Cpu | None, requests: int, config: str) -> Figure:
    """`metric`: the target's CPU per request of the window, in microseconds."""
    if cpu is None:
        return not_measured(metric, "µs", "lower", "the target's pid is unknown (give --pid)", config)
    if requests == 0:
        return not_measured(metric, "µs", "lower", "no request was answered in the window", config)
    kernel = f", {cpu.system / cpu.total:.0%} of it in the kernel" if cpu.total > 0 else ""
    return Figure(metric, cpu.total / requests * 1e6, "µs", "lower", config,
                  f"{cpu.total:.2f} CPU seconds of the target's processes for {requests} requests{kernel}")
