"""`kgc serve` with `processes = N`: start N kgc processes, each serving its share of the
partitions (`coordinator.process_split`), and keep them running.

This process serves nothing itself. It chooses the upstream once (an embedded broker is
started here, once, and named to every process), then starts process i as
`kgc serve <the same flags> --process-index i`. A process that exits on its own is started
again after a back-off: its groups are unavailable meanwhile (their clients are answered by
no one and look for the coordinator again), the other processes' groups are not touched.
A process that cannot start at all (exit status 2: a port taken, a data dir in use, a bad
setting) stops the whole start, since starting it again would fail the same way.

The first SIGTERM or SIGINT is passed on to every process, which stops gracefully
(`coordinator.app`), and this one exits once they have; a second one kills them at once.
Each process asks the kernel for SIGTERM when this one dies (`PR_SET_PDEATHSIG`), so none
outlives it, even after a kill -9.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.embedded import EmbeddedBroker, choose_upstream
from coordinator.settings import ServerConfig

log = logging.getLogger(__name__)

CANNOT_START = 2                # `kgc serve`'s exit status when it cannot start
POLL_S = 0.2
RESTART_BACKOFF_S = (1.0, 30.0)  # first and longest wait before a process that exited starts again
STEADY_S = 60.0                 # a process that ran this long starts again after the first wait
STOP_MARGIN_S = 10.0            # beyond the processes' own shutdown_timeout_ms, before they are killed
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the process that started this one exits (Linux): a
    process of `kgc serve --processes` must not outlive the one that keeps them."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            log.warning("cannot ask to stop with the parent process: %s", os.strerror(ctypes.get_errno()))


@dataclass
class _Process:
    index: int
    argv: list[str]
    popen: subprocess.Popen | None = None
    started_at: float = 0.0
    backoff_s: float = RESTART_BACKOFF_S[0]
    restart_at: float | None = None
    exited_before: bool = False

    def start(self) -> None:
        # Its own process group: a terminal's Ctrl-C reaches this process only, which passes
        # one SIGTERM on (a second signal would make the process exit at once).
        self.popen = subprocess.Popen(self.argv, process_group=0)
        self.started_at = time.monotonic()
        self.restart_at = None
        log.info("process %d started (pid %d)", self.index, self.popen.pid)


def supervise(config: ServerConfig, serve_argv: Sequence[str]) -> int:
    """Run `config.processes` processes of `kgc serve <serve_argv>` until a signal."""
    config, broker = choose_upstream(config, standalone=config.standalone)
    try:
        return _supervise(config, list(serve_argv) + _upstream_argv(config, broker))
    finally:
        if broker is not None:
            broker.close()


def _upstream_argv(config: ServerConfig, broker: EmbeddedBroker | None) -> list[str]:
    """What every process is told of the upstream chosen here, so none chooses its own."""
    if broker is not None:
        return ["--upstream", broker.bootstrap]
    return [] if config.upstream else ["--standalone", "true"]


def _supervise(config: ServerConfig, argv: list[str]) -> int:
    command = [sys.executable, "-m", "coordinator", "serve", *argv]
    processes = [_Process(i, [*command, "--process-index", str(i)]) for i in range(config.processes)]
    signals: list[int] = []
    previous = {sig: signal.signal(sig, lambda sig, _frame: signals.append(sig))
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for process in processes:
            process.start()
        status = _keep_running(processes, signals)
        _stop(processes, signals, (config.shutdown_timeout_ms / 1000) + STOP_MARGIN_S)
        return 0 if status is None else status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _keep_running(processes: list[_Process], signals: list[int]) -> int | None:
    """Until a signal (None) or a process that cannot start (its exit status)."""
    while not signals:
        now = time.monotonic()
        for process in processes:
            popen = process.popen
            if process.restart_at is not None:
                if now >= process.restart_at:
                    process.start()
                continue
            if popen is None or (code := popen.poll()) is None:
                continue
            if not process.exited_before and code == CANNOT_START:
                log.error("process %d could not start (exit status %d): stopping the others", process.index, code)
                return code
            ran_s = now - process.started_at
            if ran_s >= STEADY_S:
                process.backoff_s = RESTART_BACKOFF_S[0]
            log.error("process %d (pid %d) exited with status %d after %.1f s; its partitions' groups are "
                      "unavailable until it is started again, in %.1f s", process.index, popen.pid, code, ran_s,
                      process.backoff_s)
            process.restart_at = now + process.backoff_s
            process.backoff_s = min(process.backoff_s * 2, RESTART_BACKOFF_S[1])
            process.exited_before = True
        time.sleep(POLL_S)
    return None


def _stop(processes: list[_Process], signals: list[int], timeout_s: float) -> None:
    """SIGTERM to every process still running, then wait; a second signal, or the timeout,
    kills what is left."""
    running = [p.popen for p in processes if p.popen is not None and p.popen.poll() is None]
    asked = len(signals)
    for popen in running:
        popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(p.poll() is None for p in running):
        if len(signals) > max(asked, 1) or time.monotonic() >= deadline:
            for popen in running:
                if popen.poll() is None:
                    log.warning("process pid %d did not stop: killing it", popen.pid)
                    popen.kill()
            for popen in running:
                popen.wait()
            return
        time.sleep(POLL_S)
