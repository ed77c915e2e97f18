"""The Spark engine: the partitions' tasks become Spark tasks.

`kgc audit` / `kgc compact` of a data dir use it with a local SparkContext (`context`: the
tasks read the files, so no SQL session), of a topic with a SparkSession (`session`: Spark's
Kafka source); under spark-submit the entry is this package's `__main__.py` (see there).
The partitions' `PartitionTask`s go out as an RDD, dealt into a few Spark tasks per core
(`task_groups`: one partition each on a cluster with cores enough); each partition's task
runs `job.run_partition` in a Python worker, reads its own segment files, writes its own
outputs and returns a small `PartitionResult`. There is no DataFrame, no shuffle, and no
record ever crosses into the JVM: on this workload moving rows through Spark costs
several times the work itself (docs/benchmarks/notes.md, "The offline audit").

On a cluster every executor needs the kgc package and its dependencies (install it in
the image, or ship a packed virtualenv) and the data dir and output paths must be on a
file system every executor sees (see deploy/spark/README.md).
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from collections.abc import Callable, Sequence

from coordinator.offline.job import PartitionResult, PartitionTask
from coordinator.offline.runner import TaskMap

LOCAL_MASTER = "local[*]"


def is_local(master: str) -> bool:
    return master.startswith("local")


def context(master: str | None = None, app_name: str = "kgc-offline", jars: str | None = None):
    """A SparkContext for a job whose tasks read files in Python (`spark_map`): no SQL, so
    no SparkSession, whose SQL state adds much of a local run's start and which such a job
    never uses. The same settings as `session`; the running one (spark-submit's, a
    notebook's) when there is one."""
    from pyspark import SparkContext

    active = active_session()
    if active is not None:
        return active.sparkContext
    sc = SparkContext.getOrCreate(_conf(master, app_name, jars, reads_in_jvm=False))
    sc.setLogLevel("WARN")
    return sc


def session(master: str | None = None, app_name: str = "kgc-offline", jars: str | None = None,
            reads_in_jvm: bool = False):
    """A SparkSession for this job: `master`, else the one spark-submit set, else local;
    `jars` (comma-separated paths) added to its classpath. `reads_in_jvm`: the job's input
    is read in the JVM (Spark's Kafka source), not by the Python tasks from files."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.config(conf=_conf(master, app_name, jars, reads_in_jvm))
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _conf(master: str | None, app_name: str, jars: str | None, reads_in_jvm: bool):
    from pyspark import SparkConf

    conf = SparkConf().setAppName(app_name)
    # spark-submit starts the JVM with its --master before this runs and leaves its
    # gateway in the environment; anything else needs a master from us.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is None and not submitted:
        master = LOCAL_MASTER
    if master is not None:
        conf.setMaster(master)
        if is_local(master):
            # Loopback only: nothing to serve to other hosts, and no warning about a
            # hostname resolving to 127.0.1.1. Workers run this interpreter (its venv).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
            conf.set("spark.driver.memory", "1g")
            if not reads_in_jvm:
                # The tasks read files in Python; the local JVM only starts, plans and
                # collects, for which the client compiler alone starts sooner. Where the
                # JVM reads the input (a topic) the optimizing compiler pays for itself.
                conf.set("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    if jars:
        conf.set("spark.jars", jars)
    return conf.set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")


def active_session():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


PROGRESS_POLL_S = 0.5
# Spark tasks per core. A Spark task has a fixed cost (tens of milliseconds in local
# mode: the Python worker is handed the command and the data each time), so many more
# partitions than cores share tasks; a few tasks per core still end close together.
TASKS_PER_CORE = 4


def task_groups(tasks: Sequence[PartitionTask], cores: int) -> list[list[PartitionTask]]:
    """The partition tasks dealt round robin into at most TASKS_PER_CORE Spark tasks per
    core, one partition each when there are cores enough: tasks planned largest first
    (`runner.plan`) so make groups of about equal work."""
    count = max(1, min(len(tasks), TASKS_PER_CORE * cores))
    return [list(tasks[i::count]) for i in range(count)]


def spark_map(sc) -> TaskMap:
    """The task map on a SparkContext (`context()`'s, or a session's `sparkContext`)."""

    def run(fn: Callable[[PartitionTask], PartitionResult], tasks: Sequence[PartitionTask],
            progress: Callable[[int], None] | None = None) -> list[PartitionResult]:
        tasks = list(tasks)
        if not tasks:
            return []
        groups = task_groups(tasks, sc.defaultParallelism)

        def job() -> list[PartitionResult]:
            return sc.parallelize(groups, len(groups)).flatMap(lambda group: [fn(t) for t in group]).collect()

        if progress is None:
            return job()
        # The job runs in a thread of its own, in a job group, while this one asks the
        # status tracker how many of its tasks have finished (each holds about
        # len(tasks) / len(groups) partitions).
        group = f"kgc-offline-{uuid.uuid4().hex}"
        results: list[PartitionResult] = []
        errors: list[BaseException] = []

        def collect() -> None:
            sc.setJobGroup(group, "kgc offline")
            try:
                results.extend(job())
            except BaseException as e:          # re-raised in the caller's thread
                errors.append(e)

        worker = threading.Thread(target=collect, name="kgc-offline-job", daemon=True)
        worker.start()
        tracker = sc.statusTracker()
        while worker.is_alive():
            worker.join(PROGRESS_POLL_S)
            progress(min(len(tasks), _completed_tasks(tracker, group) * len(tasks) // len(groups)))
        if errors:
            raise errors[0]
        progress(len(tasks))
        return results

    return run


def _completed_tasks(tracker, group: str) -> int:
    done = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
    return done
