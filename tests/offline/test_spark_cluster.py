"""A real standalone Spark cluster on loopback: a master and two workers started with
pyspark's own `spark-class`, the audit and the compaction submitted with
`deploy/spark/submit.sh`; they give the summary and the bytes the local run gives.

Executors read the data dir and write their outputs at the paths the driver planned:
here the workers share this machine's file system, as a cluster shares NFS or a volume.
"""

from __future__ import annotations

import filecmp
import json

import pytest

from coordinator.offline.generate import GeneratorConfig, generate
from coordinator.offline.job import Options
from coordinator.offline.runner import audit, compact
from coordinator.offline.scan import segment_files
from storage.file_store import partition_dirs
from tests.support.spark_cluster import standalone_spark, submit

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(240)]

CONFIG = GeneratorConfig(records=3_000, groups=12, num_partitions=6, per_type=1, segment_bytes=16 * 1024)
WORKERS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_spark(tmp_path_factory.mktemp("cluster"), WORKERS) as cluster:
        yield cluster


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
