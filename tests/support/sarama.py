"""The Go programs of tests/e2e/go built against a sarama, for the tests that run them:
sarama 1.22, Debian's package, in GOPATH mode, and IBM/sarama 1.61 of go.mod, in module mode
(from the Go module proxy; `.ci/run` downloads it). A fixture skips, saying why, when Go, that
sarama or the build is unavailable."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

import pytest

GO_DIR = pathlib.Path(__file__).parents[1] / "e2e" / "go"
GOPATH = pathlib.Path("/usr/share/gocode")       # where Debian's golang-*-dev packages put Go sources
DEBIAN_SARAMA = GOPATH / "src" / "github.com" / "Shopify" / "sarama"


@dataclass(frozen=True)
class Sarama:
    """One build of the test programs: the sarama it links and the Kafka version it is told."""
    name: str
    directory: pathlib.Path
    kafka_version: str     # sarama's Config.Version: the request versions it may use

    def program(self, name: str) -> str:
        return str(self.directory / name)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the sarama tests need Go (Debian: golang-go) on PATH")
    return go


def _build(command: list[str], env: dict[str, str], cwd: pathlib.Path, what: str) -> None:
    try:
        subprocess.run(command, env=env, cwd=cwd, check=True, timeout=300, capture_output=True, text=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot build {what}: {exc} {(exc.stderr or '')[-1000:]}")


@pytest.fixture(scope="module")
def sarama_1_22(tmp_path_factory) -> Sarama:
    """`sarama_group` built offline: Go in GOPATH mode against Debian's packaged sarama."""
    go = _go()
    if not DEBIAN_SARAMA.is_dir():
        pytest.skip(f"the sarama 1.22 tests need its sources in {DEBIAN_SARAMA} "
                    "(Debian: golang-github-shopify-sarama-dev)")
    out = tmp_path_factory.mktemp("sarama-1.22")
    # The same program: sarama 1.22 is still published under Shopify's import path.
    source = out / "sarama_group.go"
    source.write_text((GO_DIR / "sarama_group" / "main.go").read_text().replace(
        '"github.com/IBM/sarama"', '"github.com/Shopify/sarama"'))
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOPROXY": "off", "GOFLAGS": "",
           "GOCACHE": str(out / "cache"), "HOME": str(out)}
    _build([go, "build", "-o", str(out / "sarama_group"), str(source)], env, out, "sarama_group against sarama 1.22")
    # Any version from 0.10.2 (groups) gives sarama 1.22's same group requests.
    return Sarama("1.22", out, "2.1.0")


@pytest.fixture(scope="module")
def sarama_1_61(tmp_path_factory) -> Sarama:
    """Every program built in module mode against go.mod's IBM/sarama (go.sum checks it)."""
    go = _go()
    out = tmp_path_factory.mktemp("sarama-1.61")
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}
    for name in ("sarama_group", "sarama_eos", "sarama_secure", "sarama_member"):
        _build([go, "build", "-o", str(out / name), f"./{name}"], env, GO_DIR, f"{name} against IBM/sarama")
    return Sarama("1.61", out, "4.0.0")


def run_members(sarama: Sarama, bootstrap: str, topic: str, group: str, expect: int, members: int = 1) -> dict:
    """`members` sarama members, the second joining once the first holds partitions: they
    consume only once every member holds some, until `expect` records arrived between them."""
    run = subprocess.run([sarama.program("sarama_group"), bootstrap, topic, group, str(expect), str(members),
                          sarama.kafka_version],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    report["log"] = run.stderr
    return report


class SaramaMember:
    """`sarama_member` running: one member, its events (tests/e2e/go/sarama_member) read as
    they come."""

    def __init__(self, sarama: Sarama, bootstrap: str, topic: str, group: str, *, strategy: str = "range",
                 instance_id: str | None = None):
        self.name = instance_id or f"sarama-{strategy}"
        options = {"strategy": strategy, **({"instance_id": instance_id} if instance_id else {})}
        self.proc = subprocess.Popen([sarama.program("sarama_member"), bootstrap, topic, group, sarama.kafka_version,
                                      json.dumps(options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self._event), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self._log), daemon=True).start()

    @staticmethod
    def _read(stream, handle) -> None:
        for line in stream:
            handle(line)

    def _event(self, line: str) -> None:
        self.events.append(json.loads(line))

    def _log(self, line: str) -> None:
        self.stderr.append(line)
        del self.stderr[:-100]

    def of(self, kind: str) -> list[dict]:
        return [e for e in list(self.events) if e["event"] == kind]

    @property
    def sessions(self) -> list[dict]:
        return self.of("session")

    @property
    def assignment(self) -> set[int]:
        """The partitions it consumes now: claimed and not revoked since (a session's end
        releases them all)."""
        held: set[int] = set()
        for e in list(self.events):
            if e["event"] == "claim":
                held.add(e["partition"])
            elif e["event"] == "revoked":
                held.discard(e["partition"])
            elif e["event"] == "end":
                held.clear()
        return held

    def wait(self, done, what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}: {''.join(self.stderr)}"
            assert time.monotonic() < deadline, f"{self.name}: {what}: {self.events[-20:]} " \
                                                f"{''.join(self.stderr[-20:])}"
            time.sleep(0.05)

    def wait_sessions(self, n: int, timeout_s: float = 60) -> list[dict]:
        self.wait(lambda: len(self.sessions) >= n, f"{n} sessions", timeout_s)
        return self.sessions

    def close(self, timeout_s: float = 30) -> None:
        """Closes its stdin: the member closes its client (committing what it read) and exits."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}: {''.join(self.stderr)}"
