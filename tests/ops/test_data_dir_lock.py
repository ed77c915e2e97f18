"""Two kgc processes on one data dir: the second `kgc serve` refuses to start, and `kgc
repair` refuses to touch a partition, while the first serves it (both would write the
same segments); once the first is killed (kill -9: no clean-up) the dir is free again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.kgc import KgcProcess

TIMEOUT_S = 60


def kgc(*args: str) -> subprocess.CompletedProcess:
    """A kgc command that must exit by itself: one that is still running at the bound is
    killed, by its PID, and reported (a second `kgc serve` that started)."""
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=TIMEOUT_S)
        pytest.fail(f"kgc {' '.join(args)} was still running after {TIMEOUT_S} s: {out}{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def serve(data_dir) -> subprocess.CompletedProcess:
    return kgc("serve", "--standalone", "--port", "0", "--http-port", "0", "--data-dir", str(data_dir),
               "--log-level", "WARNING")


def last_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.timeout(240)
def test_a_data_dir_served_by_one_kgc_is_refused_to_others_until_it_dies(tmp_path):
    data_dir = tmp_path / "data"
    first = KgcProcess("--data-dir", str(data_dir), "--log-level", "WARNING").start()
    try:
        pid = first.proc.pid

        second = serve(data_dir)
        assert second.returncode == 2, second.stderr
        assert "kgc serving on" not in second.stdout
        assert last_line(second) == (
            f"kgc serve: cannot use the data dir {data_dir}: another kgc process (pid {pid}) serves "
            "partitions 0-49; stop the other kgc first, or set data_dir (--data-dir, KGC_DATA_DIR) to another "
            "directory")

        repair = kgc("repair", str(data_dir), "--accept-loss", "7")
        assert repair.returncode == 2 and repair.stdout == "", repair
        assert last_line(repair) == (f"kgc repair: data dir {data_dir}: another kgc process (pid {pid}) serves "
                                     "partition 7; stop it first: nothing was changed")

        # Reading a live data dir is fine, and its lock file is no partition to the reader.
        inspect = kgc("inspect", str(data_dir))
        assert inspect.returncode == 0, inspect.stderr
        assert ".lock" not in inspect.stdout

        first.kill()            # SIGKILL: the kernel drops its locks with it
        assert first.proc.returncode == -signal.SIGKILL

        repair = kgc("repair", str(data_dir), "--accept-loss", "7")
        assert repair.returncode == 0, repair.stderr
        assert "partition 7: nothing was damaged" in repair.stdout
        assert KgcProcess("--data-dir", str(data_dir), "--log-level", "WARNING").start().stop() == 0
    finally:
        first.stop()
