"""`coordinator/bench/cpu.py`: a target's CPU counts the processes below it (kgc's
`processes = N`, a JVM under its launcher), and a figure per request says when it could not
be measured."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from coordinator.bench.cpu import Cpu, cpu_in_window, cpu_seconds, per_request

# The grandchild spends half a second of its own CPU, says so, and waits to be stopped.
BURNER = """
import sys, time
while time.process_time() < 0.5:
    pass
print("burned", flush=True)
time.sleep(60)
"""
# The child starts the grandchild and waits on it, spending next to nothing itself.
PARENT = f"""
import subprocess, sys
subprocess.run([sys.executable, "-c", {BURNER!r}])
"""


@pytest.fixture
def parent_of_a_burner():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline() == "burned\n"       # bounded: the burner ends its loop
        yield parent.pid
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)


def test_a_process_counts_the_cpu_of_the_processes_below_it(parent_of_a_burner):
    spent = cpu_seconds(parent_of_a_burner)
    assert spent.total >= 0.45, spent     # the grandchild's half second, to the clock tick


def test_a_window_counts_only_what_is_spent_inside_it(parent_of_a_burner):
    # The burner now sleeps: the half second it spent before the window is not in it.
    now = time.perf_counter()
    spent = asyncio.run(cpu_in_window(parent_of_a_burner, now, now + 0.2))
    assert spent is not None and 0 <= spent.total < 0.1, spent


def test_an_unknown_pid_is_not_measured_and_says_why():
    assert asyncio.run(cpu_in_window(None, 0.0, 0.0)) is None
    figure = per_request("x: target CPU per commit", None, 100, "cfg")
    assert figure.value is None and "pid is unknown" in figure.note


def test_cpu_per_request_is_in_microseconds_and_a_window_without_requests_has_none():
    figure = per_request("x", Cpu(user=0.375, system=0.125), 1_000, "cfg")
    assert (figure.value, figure.unit) == (pytest.approx(500.0), "µs")
    assert figure.note.endswith("1000 requests, 25% of it in the kernel")
    empty = per_request("x", Cpu(0.5, 0.0), 0, "cfg")
    assert empty.value is None and "no request" in empty.note
