import contextlib
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

from tests.support.kgc import free_port, kgc_process

JS_DIR = pathlib.Path(__file__).parent / "js"

# Fast-moving groups: session timeouts down to 0.5 s are accepted, a short initial
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


@pytest.fixture(scope="session")
def kgc(tansu, tmp_path_factory):
    """`kgc serve` in front of the session's Tansu: clients bootstrap here and never see Tansu."""
    broker_port = free_port()
    log_path = tmp_path_factory.mktemp("kgc") / "kgc.log"
    with kgc_process("--upstream", tansu.bootstrap, "--broker-port", f"{tansu.node_id}={broker_port}",
                     *KGC_GROUP_FLAGS, log_path=str(log_path)) as proc:
        # The broker's listener opens once kgc has learnt the broker from upstream.
        wait_listening(broker_port)
        yield proc


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("kafkajs test needs Node.js and npm on PATH")
    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        try:
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, check=True, timeout=180,
                           capture_output=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            output = getattr(exc, "stderr", b"") or b""
            pytest.skip(f"cannot install kafkajs from npm in {JS_DIR}: {exc} {output.decode()[-500:]}")
    return node
