"""A real standalone Spark cluster on loopback: a master and two workers started with
pyspark's own `spark-class`, the audit and the compaction submitted with
`deploy/spark/submit.sh`; they give the summary and the bytes the local run gives.

Executors read the data dir and write their outputs at the paths the driver planned:
here the workers share this machine's file system, as a cluster shares NFS or a volume.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from coordinator.embedded import free_port
from coordinator.offline.generate import GeneratorConfig, generate
from coordinator.offline.job import Options
from coordinator.offline.runner import audit, compact
from coordinator.offline.scan import segment_files
from storage.file_store import partition_dirs

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
SUBMIT = REPO / "deploy" / "spark" / "submit.sh"
CONFIG = GeneratorConfig(records=3_000, groups=12, num_partitions=6, per_type=1, segment_bytes=16 * 1024)
WORKERS = 2


def spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")
    return Path(pyspark.__file__).parent


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = spark_home()
    work = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work),
           "SPARK_WORKER_DIR": str(work / "worker"), "PYSPARK_PYTHON": sys.executable}
    port, ui_port = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    commands = [[spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(ui_port)]]
    commands += [[spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                  "--cores", "1", "--memory", "768m", "--webui-port", str(free_port())] for _ in range(WORKERS)]
    processes = []
    try:
        for i, command in enumerate(commands):
            log = open(work / f"daemon-{i}.log", "wb")    # noqa: SIM115 (closed with the process below)
            processes.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True), log))
        deadline = time.monotonic() + 90
        while alive_workers(ui_port) < WORKERS:
            if time.monotonic() > deadline or any(p.poll() is not None for p, _ in processes):
                logs = "\n".join((work / f"daemon-{i}.log").read_text()[-2000:] for i in range(len(commands)))
                pytest.fail(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(0.5)
        yield master, env
    finally:
        for process, _log in processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process, log in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            log.close()


def submit(cluster, *args: str) -> str:
    master, env = cluster
    env = {**env, "SPARK_MASTER": master, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
           "SPARK_SUBMIT_ARGS": "--conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 "
                                "--conf spark.executor.memory=512m --conf spark.ui.enabled=false"}
    done = subprocess.run(["sh", str(SUBMIT), *args], env=env, capture_output=True, text=True, timeout=150,
                          cwd="/")
    assert done.returncode in (0, 2), f"spark-submit failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_audit_and_compaction_on_a_standalone_cluster_match_the_local_run(cluster, tmp_path):
    shared = tmp_path / "shared"                     # the path every executor sees
    data = shared / "data"
    generate(data, CONFIG)
    now = str(CONFIG.now_ms)
    out = submit(cluster, "audit", str(data), "--out", str(shared / "report"), "--now-ms", now)
    assert "findings:" in out
    local = audit(data, tmp_path / "local-report", Options(now_ms=CONFIG.now_ms))
    assert json.loads((shared / "report" / "summary.json").read_text()) == local.summary
    assert local.summary["findings_total"] > 0

    submit(cluster, "compact", str(data), "--out", str(shared / "compacted"), "--now-ms", now)
    compact(data, tmp_path / "local-compacted", Options(now_ms=CONFIG.now_ms))
    dirs = list(partition_dirs(tmp_path / "local-compacted").values())
    assert len(dirs) == CONFIG.num_partitions
    for d in dirs:
        names = [p.name for _b, p in segment_files(d)]
        _match, mismatch, errors = filecmp.cmpfiles(d, shared / "compacted" / d.name, names, shallow=False)
        assert mismatch == errors == []
