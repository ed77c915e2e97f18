"""Ctrl-C in a terminal: SIGINT to the whole foreground process group stops `kgc serve` with
its embedded broker within the shutdown deadline, every time.

kgc runs in a process group of its own, as a shell runs a foreground job, and the test
signals the group, as the terminal does. The embedded broker must not be in that group
(kgc stops it, last), and kgc's stop must not wait on an upstream that is going away.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from tests.support.admin import create_topic
from tests.support.clients import wait_until
from tests.support.embedded_upstream import EMBEDDED_LINE, log_text, process_exists
from tests.support.kgc import KgcProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TRIES = 20
SHUTDOWN_TIMEOUT_MS = 2000
# The deadline plus the time to flush the log and stop the broker, which are quick here.
STOP_BOUND_S = SHUTDOWN_TIMEOUT_MS / 1000 + 2
BROKER_LISTENER = re.compile(r"listening on \S+ \(broker \d+\)")


def test_ctrl_c_stops_kgc_serve_and_its_embedded_broker_within_the_deadline_every_time(tansu, tmp_path):
    for attempt in range(TRIES):
        ctrl_c_once(tansu, tmp_path / f"kgc-{attempt}.log")


def ctrl_c_once(tansu, log_path) -> None:
    # The embedded broker is the same Tansu build as the session's: the same node id.
    port_base = free_port() - tansu.node_id
    kgc = KgcProcess("--shutdown-timeout-ms", str(SHUTDOWN_TIMEOUT_MS), "--broker-port-base", str(port_base),
                     log_path=str(log_path), embedded=True, own_session=True).start()
    try:
        wait_until(lambda: BROKER_LISTENER.search(log_text(log_path)), 20, lambda: log_text(log_path)[-2000:])
        broker_pid = int(EMBEDDED_LINE.search(log_text(log_path))[1])
        create_topic(kgc.bootstrap, 1)   # a forwarded session open when the signal comes
        os.killpg(kgc.proc.pid, signal.SIGINT)
        started = time.monotonic()
        try:
            code = kgc.proc.wait(STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{log_path.name}: kgc still running {STOP_BOUND_S}s after Ctrl-C:\n"
                        + log_text(log_path)[-3000:])
        assert code == 0, log_text(log_path)[-3000:]
        assert time.monotonic() - started < STOP_BOUND_S
        assert not process_exists(broker_pid)
        text = log_text(log_path)
        # The broker outlived the graceful stop: kgc stopped it after closing its log.
        assert text.index("log flushed and closed") < text.index(f"embedded upstream (pid {broker_pid}) stopped")
    finally:
        kgc.kill()
