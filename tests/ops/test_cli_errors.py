"""Every command fails with one line naming the problem (and the setting or argument to
change) and an exit status, never a traceback: 2 for something to change on the command
line or in the settings, 1 for a failure outside kgc, 141 when the reader of stdout left."""

from __future__ import annotations

import socket
import subprocess
import sys
from importlib.util import find_spec

import pytest

from tests.support.data_dirs import (
    bound_by_file_modes,
    made_by_kgc,
    make_read_only,
    make_writable,
    read_only_partitions,
)
from tests.support.kgc import free_port

TIMEOUT_S = 60
# `kgc audit` checks for its extra before anything else: without it (the fast subset needs
# only '.[dev]') these tests would see that message instead of the one they check.
needs_audit_extra = pytest.mark.skipif(
    any(find_spec(m) is None for m in ("pyarrow", "numpy", "pyspark")),
    reason="kgc audit needs the spark extra (pip install -e '.[spark]')")


def kgc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def one_line_error(done: subprocess.CompletedProcess, status: int, *phrases: str) -> str:
    """The last stderr line (serve logs before it), checked to be the error, alone."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == status, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    for phrase in phrases:
        assert phrase in line, line
    return line


@pytest.fixture
def taken_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("offline") / "data"
    done = kgc("generate", str(path), "--records", "3000", "--groups", "20")
    assert done.returncode == 0, done.stderr
    return str(path)


def test_a_kafka_port_in_use(taken_port):
    done = kgc("serve", "--standalone", "--port", str(taken_port), "--http-port", "0")
    assert one_line_error(done, 2, f"127.0.0.1:{taken_port}", "address already in use", "--port").startswith(
        "kgc serve: cannot listen for Kafka clients")


def test_a_kafka_port_in_use_at_a_first_start_with_the_embedded_broker_is_the_last_line(taken_port, tmp_path):
    # The embedded broker is stopped after kgc gives up; what it logs then must not bury the
    # reason, nor may a new data dir's 50 partitions each say that they have a new manifest.
    done = kgc("serve", "--port", str(taken_port), "--http-port", "0", "--data-dir", str(tmp_path / "data"))
    one_line_error(done, 2, f"127.0.0.1:{taken_port}", "address already in use", "--port")
    assert "embedded upstream" in done.stderr and "manifest" not in done.stderr
    assert len(done.stderr.splitlines()) < 10, done.stderr


def test_an_http_port_in_use(taken_port):
    done = kgc("serve", "--standalone", "--port", "0", "--http-port", str(taken_port))
    assert one_line_error(done, 2, f"127.0.0.1:{taken_port}", "address already in use", "--http-port").startswith(
        "kgc serve: cannot serve HTTP")


@needs_audit_extra
def test_audit_of_a_missing_data_dir(tmp_path):
    done = kgc("audit", str(tmp_path / "nothing"), "--out", str(tmp_path / "report"), "--engine", "python")
    assert done.stderr.strip() == f"kgc audit: no data dir at {tmp_path / 'nothing'}: give the directory kgc " \
                                  "serve --data-dir wrote"
    one_line_error(done, 2)
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("command", [pytest.param("audit", marks=needs_audit_extra), "compact"])
def test_an_existing_out(command, data_dir, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    done = kgc(command, data_dir, "--out", str(tmp_path / "out"), "--engine", "python")
    assert len(done.stderr.strip().splitlines()) == 1
    one_line_error(done, 2, f"kgc {command}: --out {tmp_path / 'out'} exists and is not empty")
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


@needs_audit_extra
def test_audit_with_an_unreachable_upstream(data_dir, tmp_path):
    port = free_port()
    done = kgc("audit", data_dir, "--out", str(tmp_path / "report"), "--engine", "python",
               "--upstream", f"127.0.0.1:{port}")
    assert len(done.stderr.strip().splitlines()) == 1
    one_line_error(done, 1, f"kgc audit: cannot read log offsets from --upstream 127.0.0.1:{port}", "refused")


def test_groups_with_an_unreachable_bootstrap_server():
    port = free_port()
    done = kgc("groups", "--bootstrap-server", f"127.0.0.1:{port}", "list")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    one_line_error(done, 1, f"kgc groups: cannot reach 127.0.0.1:{port}", "--bootstrap-server")


def test_inspect_json_into_a_pipe_closed_early(data_dir):
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", "inspect", data_dir, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(100)       # `| head -c 100`: read a little, then go away
    proc.stdout.close()
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert err.decode() == ""
    assert proc.returncode == 141


@needs_audit_extra
@pytest.mark.parametrize(("engine", "missing", "says"), [
    ("spark", {"pyspark"}, "kgc audit: needs pyspark (the 'spark' extra): pip install 'kgc[spark]', or use "
                           "--engine python"),
    ("python", {"numpy"}, "kgc audit: needs numpy (the 'spark' extra): pip install 'kgc[spark]'"),
])
def test_audit_without_its_extra(engine, missing, says, data_dir, tmp_path, monkeypatch, capsys):
    # The lightest install ('.[embedded]') has neither: what its user sees.
    from coordinator import cli
    from coordinator.offline import cli as offline_cli

    real = offline_cli.find_spec
    monkeypatch.setattr(offline_cli, "find_spec", lambda name: None if name in missing else real(name))
    status = cli.main(["audit", data_dir, "--out", str(tmp_path / "report"), "--engine", engine])
    assert (status, capsys.readouterr().err.strip()) == (2, says)
    assert not (tmp_path / "report").exists()


def test_a_data_dir_kgc_cannot_create(tmp_path):
    (tmp_path / "a-file").write_text("")
    done = kgc("serve", "--standalone", "--port", "0", "--http-port", "0", "--data-dir",
               str(tmp_path / "a-file" / "data"))
    one_line_error(done, 2, f"kgc serve: cannot open the data dir {tmp_path / 'a-file' / 'data'}: not a directory",
                   "--data-dir")


@pytest.fixture
def unwritable_data_dir(tmp_path):
    path = made_by_kgc(tmp_path / "data")
    make_read_only(path)
    yield path
    make_writable(path)


def test_a_data_dir_whose_files_kgc_cannot_write(unwritable_data_dir):
    # Not one partition can be opened, nor locked first (the lock file is read-only too): kgc
    # could serve no group, so it says so once and stops instead of serving with every
    # partition failed.
    path = unwritable_data_dir
    done = subprocess.run([sys.executable, "-m", "coordinator", "serve", "--standalone", "--port", "0",
                           "--http-port", "0", "--data-dir", str(path)],
                          capture_output=True, text=True, timeout=TIMEOUT_S, **bound_by_file_modes())
    line = one_line_error(done, 2, f"kgc serve: cannot use the data dir {path}", "none of its 50 partitions",
                          "can be locked", "Permission denied", f"{path / '.lock'}", "--data-dir")
    assert "kgc serving on" not in done.stdout
    assert [entry for entry in done.stderr.splitlines() if "ERROR" in entry] == [], done.stderr
    assert line.count("partition") == 1, line     # the count, once


def test_a_data_dir_whose_partitions_kgc_cannot_write(tmp_path):
    # The lock file is writable, every partition directory is not: locked, then not one opens.
    path = made_by_kgc(tmp_path / "data")
    read_only_partitions(path, range(50))
    try:
        done = subprocess.run([sys.executable, "-m", "coordinator", "serve", "--standalone", "--port", "0",
                               "--http-port", "0", "--data-dir", str(path)],
                              capture_output=True, text=True, timeout=TIMEOUT_S, **bound_by_file_modes())
    finally:
        make_writable(path)
    line = one_line_error(done, 2, f"kgc serve: cannot use the data dir {path}", "none of its 50 partitions",
                          "Permission denied", "--data-dir")
    assert "kgc serving on" not in done.stdout
    assert line.count("partition") == 2, line     # the count and the first partition's error, once
