"""A real standalone Spark cluster on loopback, and `deploy/spark/submit.sh` run against it.

`standalone_spark(work, workers)` starts a master and `workers` workers with PySpark's own
`spark-class` (logs in `work`), waits until every worker has registered, yields
`(master_url, env)` and stops them by process group. `submit(cluster, *args)` runs
submit.sh on it as an operator would, driver and executors on loopback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
SUBMIT = REPO / "deploy" / "spark" / "submit.sh"
START_TIMEOUT_S = 90


def spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")
    return Path(pyspark.__file__).parent


def alive_workers(ui_port: int) -> int:
    """Workers the master reports; 0 while its UI is not up or not yet answering JSON (a
    master still starting can answer /json/ with its HTML page)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def bound_ui_port(master_log: Path, asked: int) -> int:
    """The port the master's UI says it bound: Spark moves to the next port when the one asked
    for was taken meanwhile, and then whatever holds the asked one is not the master."""
    bound = re.search(rb"MasterWebUI.*started at http://[^:]+:(\d+)", master_log.read_bytes())
    return int(bound.group(1)) if bound else asked


def distinct_free_ports(count: int) -> list[int]:
    """`count` free ports, no two alike (the kernel may hand the same one out twice in a row)."""
    ports: list[int] = []
    for _ in range(100):
        if len(ports) == count:
            break
        port = free_port()
        if port not in ports:
            ports.append(port)
    assert len(ports) == count, "could not find distinct free ports"
    return ports


@contextmanager
def standalone_spark(work: Path, workers: int) -> Iterator[tuple[str, dict[str, str]]]:
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work),
           "SPARK_WORKER_DIR": str(work / "worker"), "PYSPARK_PYTHON": sys.executable}
    port, ui_port, *worker_ui_ports = distinct_free_ports(2 + workers)
    master = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    commands = [[spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(ui_port)]]
    commands += [[spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                  "--cores", "1", "--memory", "768m", "--webui-port", str(worker_ui_port)]
                 for worker_ui_port in worker_ui_ports]
    processes = []
    try:
        for i, command in enumerate(commands):
            log = open(work / f"daemon-{i}.log", "wb")    # noqa: SIM115 (closed with the process below)
            processes.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True), log))
        deadline = time.monotonic() + START_TIMEOUT_S
        while alive_workers(bound_ui_port(work / "daemon-0.log", ui_port)) < workers:
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


def submit(cluster: tuple[str, dict[str, str]], *args: str, submit_args: str = "",
           env: dict[str, str] | None = None, timeout_s: float = 150) -> str:
    """submit.sh with `args` on the cluster; its stdout (exit 0, or 2 for findings)."""
    master, cluster_env = cluster
    run_env = {**cluster_env, "SPARK_MASTER": master, "PATH": f"{Path(sys.executable).parent}:{cluster_env['PATH']}",
               "SPARK_SUBMIT_ARGS": "--conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 "
                                    "--conf spark.executor.memory=512m --conf spark.ui.enabled=false " + submit_args,
               **(env or {})}
    done = subprocess.run(["sh", str(SUBMIT), *args], env=run_env, capture_output=True, text=True,
                          timeout=timeout_s, cwd="/")
    assert done.returncode in (0, 2), f"spark-submit failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout
