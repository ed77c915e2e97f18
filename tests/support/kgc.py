"""Run kgc for a test: in-process (fast, same loop) or as a `kgc serve` subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

from coordinator.app import KgcApp
from coordinator.group.config import GroupConfig
from coordinator.settings import ServerConfig
from tests.support.ports import free_port, free_port_run

# Fast-moving groups for tests: Kafka's floor of 6 s on session timeouts would make every
# expiry test slow.
TEST_GROUP_CONFIG = GroupConfig(min_session_timeout_ms=500, initial_rebalance_delay_ms=0)

# The same for a `kgc serve` subprocess: session timeouts down to 0.5 s are accepted, a short initial
# rebalance delay lets three members that start together form one generation, and
# KIP-848 members heartbeat (and so pick up released partitions) every 0.5 s.
KGC_GROUP_FLAGS = ("--min-session-timeout-ms", "500", "--initial-rebalance-delay-ms", "200",
                   "--consumer-heartbeat-interval-ms", "500")


def wait_listening(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {port} after {timeout_s}s")


@contextlib.asynccontextmanager
async def running_kgc(config: ServerConfig | None = None, **group_overrides) -> AsyncIterator[KgcApp]:
    config = config or ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG)
    if group_overrides:
        config = replace(config, group=replace(config.group, **group_overrides))
    app = KgcApp(config)
    await app.start()
    await app.runtime.wait_loaded()
    try:
        yield app
    finally:
        await app.stop()


def _processes(args: tuple[str, ...]) -> int:
    """How many ports from `port` on kgc listens: one per process (`--processes N`)."""
    for i, arg in enumerate(args):
        if arg == "--processes" and i + 1 < len(args):
            return int(args[i + 1])
        if arg.startswith("--processes="):
            return int(arg.split("=", 1)[1])
    return 1


class KgcProcess:
    """`kgc serve` in a child process, stopped (or killed) by its PID.

    Without `--upstream` it runs `--standalone` unless `embedded=True`: `kgc serve` alone
    would start the embedded broker, on a fixed listener port, in every test. Its HTTP server
    takes any free port unless `--http-port` is given (the default, 9180, is fixed)."""

    def __init__(self, *args: str, port: int | None = None, log_path: str | None = None,
                 env: dict[str, str] | None = None, embedded: bool = False, own_session: bool = False,
                 popen: dict | None = None):
        self.port = port or free_port_run(_processes(args))
        if not embedded and "--upstream" not in args and "--standalone" not in args:
            args = ("--standalone", *args)
        if "--http-port" not in args:
            args = ("--http-port", "0", *args)
        self.args = ["--host", "127.0.0.1", "--port", str(self.port), *args]
        self.log_path = log_path
        self.env = env  # None: this process's environment
        self.own_session = own_session  # its own process group, as a terminal's foreground job
        self.popen = popen or {}  # more Popen arguments (tests.support.data_dirs.bound_by_file_modes)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30.0) -> KgcProcess:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-m", "coordinator", "serve", *self.args],
                                     stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=self.own_session, **self.popen)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kgc exited with {self.proc.returncode} (log: {self.log_path})")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"kgc did not listen on {self.port} within {timeout_s}s")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout_s: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextlib.contextmanager
def kgc_process(*args: str, **kw) -> Iterator[KgcProcess]:
    proc = KgcProcess(*args, **kw).start()
    try:
        yield proc
    finally:
        proc.stop()


@contextlib.contextmanager
def kgc_in_front_of(cluster, *args: str, **kw) -> Iterator[KgcProcess]:
    """`kgc serve --upstream` a KafkaCluster (tests/support/kafka.py), with a kgc listener of
    its own per broker, yielded once every one of them listens (kgc opens a broker's listener
    when it has learnt the broker from upstream)."""
    ports = {node.node_id: free_port() for node in cluster.nodes}
    brokers = [a for node_id, port in ports.items() for a in ("--broker-port", f"{node_id}={port}")]
    with kgc_process("--upstream", cluster.bootstrap, *brokers, *args, **kw) as proc:
        for port in ports.values():
            wait_listening(port)
        yield proc


@contextlib.contextmanager
def kgc_before(kafka, *flags: str) -> Iterator[tuple[KgcProcess, int]]:
    """kgc in front of the session's Kafka with an HTTP port the test knows, for /metrics."""
    broker_port, http_port = free_port(), free_port()
    with kgc_process("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                     "--http-port", str(http_port), *KGC_GROUP_FLAGS, *flags) as proc:
        wait_listening(broker_port)
        yield proc, http_port


def rss_bytes(pid: int) -> int:
    """A process's resident set size (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def kgc_command(*args: str, expect_status: int = 0) -> str:
    """`python -m coordinator ARGS` (a CLI command, not `serve`): its stdout, once it exits with `expect_status`."""
    done = subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == expect_status, (done.stdout, done.stderr)
    return done.stdout
