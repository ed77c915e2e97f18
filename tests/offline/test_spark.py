"""The Spark driver gives exactly what the plain-Python run gives (local[1], shared session)."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import filecmp
import json
import subprocess
import sys

import pytest

# The audit writes Parquet with pyarrow (the spark extra); without it this module skips,
# saying so, before the imports below that need it.
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator.offline.cli import main
from coordinator.offline.generate import GeneratorConfig, expected_identities, generate
from coordinator.offline.job import Options
from coordinator.offline.runner import audit, compact
from coordinator.offline.scan import segment_files
from coordinator.offline.spark_engine import spark_map
from coordinator.offline.state import replay_state
from storage.file_store import partition_dirs

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

# Few partitions: every Spark task costs a round trip to a Python worker.
SMALL = GeneratorConfig(records=3_000, groups=12, num_partitions=6, per_type=1, segment_bytes=16 * 1024)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    directory = tmp_path_factory.mktemp("spark") / "data"
    return directory, generate(directory, SMALL)


def test_spark_audit_matches_the_plain_run_and_the_manifest(spark, small, tmp_path):
    directory, manifest = small
    options = Options(now_ms=SMALL.now_ms)
    on_spark = audit(directory, tmp_path / "spark", options, spark_map(spark.sparkContext), manifest.log_offsets, "test")
    plain = audit(directory, tmp_path / "plain", options, log_offsets=manifest.log_offsets, upstream="test")
    assert expected_identities(f for r in on_spark.results for f in r.findings) == \
        expected_identities(manifest.expected)
    assert on_spark.summary == plain.summary
    for table in ("findings", "final_offsets", "groups"):
        assert pq.read_table(tmp_path / "spark" / f"{table}.parquet").equals(
            pq.read_table(tmp_path / "plain" / f"{table}.parquet"))


def test_spark_compaction_writes_the_same_bytes(spark, small, tmp_path):
    directory, _manifest = small
    options = Options(now_ms=SMALL.now_ms, segment_bytes=4096)
    compact(directory, tmp_path / "spark", options, spark_map(spark.sparkContext))
    compact(directory, tmp_path / "plain", options)
    plain_dirs = list(partition_dirs(tmp_path / "plain").values())
    assert len(plain_dirs) == SMALL.num_partitions
    for d in plain_dirs:
        names = [path.name for _b, path in segment_files(d)]
        spark_dir = tmp_path / "spark" / d.name
        assert [path.name for _b, path in segment_files(spark_dir)] == names
        _match, mismatch, errors = filecmp.cmpfiles(d, spark_dir, names, shallow=False)
        assert mismatch == errors == []
    assert replay_state(tmp_path / "spark").offsets == replay_state(directory).offsets


def test_cli_runs_on_spark_without_stopping_a_session_it_did_not_start(spark, small, tmp_path, capsys):
    directory, _manifest = small
    code = main(["audit", str(directory), "--out", str(tmp_path / "report"), "--master", "local[1]",
                 "--now-ms", str(SMALL.now_ms), "--fail-on-findings"])
    assert code == 2
    assert "spark: session" in capsys.readouterr().out
    assert spark.sparkContext.parallelize([1, 2]).count() == 2


def test_cli_in_its_own_process_starts_and_stops_a_local_spark_of_its_own(small, tmp_path):
    """`kgc audit DATA_DIR` as a user runs it: no session running, so it starts its own
    (a SparkContext: the tasks read the files) and stops it, and reports what the plain
    run reports."""
    directory, manifest = small
    done = subprocess.run([sys.executable, "-m", "coordinator.offline", "audit", str(directory), "--out",
                           str(tmp_path / "report"), "--master", "local[1]", "--now-ms", str(SMALL.now_ms)],
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "spark: session" in done.stdout
    plain = audit(directory, tmp_path / "plain", Options(now_ms=SMALL.now_ms))
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["findings"] == plain.summary["findings"]

def test_spark_map_reports_finished_tasks_as_they_finish(spark, small, tmp_path):
    from dataclasses import replace

    from coordinator.offline.job import run_partition
    from coordinator.offline.runner import plan

    directory, _manifest = small
    tasks = [replace(t, report_dir=str(tmp_path)) for t in plan(directory, Options(now_ms=SMALL.now_ms))]
    seen: list[int] = []
    results = spark_map(spark.sparkContext)(run_partition, tasks, seen.append)
    assert sorted(r.partition for r in results) == sorted(t.partition for t in tasks)
    assert seen[-1] == len(tasks) and seen == sorted(seen)
