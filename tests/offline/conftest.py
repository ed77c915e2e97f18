"""Fixtures for the offline audit and compaction tests.

`spark` is one SparkSession for the whole run, on `local[1]` (loopback, UI off, two
shuffle partitions: `spark_engine.session`), skipped when pyspark or Java is missing.
The generated data dirs are made once per run and only read by the tests.
"""

from __future__ import annotations

import os
import shutil

import pytest

from coordinator import records
from coordinator.offline.generate import GeneratorConfig, generate
from storage.api import LogRecord


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")
    from coordinator.offline.spark_engine import session

    spark = session("local[1]")
    yield spark
    spark.stop()


# Anomalies of every kind, damaged batches, and active segments still being written.
DIRTY = GeneratorConfig(records=6_000, groups=24, integrity=True, partial_tail=True, segment_bytes=32 * 1024)
# Normal groups only, for compaction (which refuses damaged partitions).
DAY_MS = 24 * 3600 * 1000
CLEAN = GeneratorConfig(records=6_000, groups=24, per_type=0, segment_bytes=32 * 1024)
# A log as Kafka writes it: no audit headers, damaged batches and live tails included.
KAFKA_WRITTEN = GeneratorConfig(records=6_000, groups=24, integrity=True, partial_tail=True, headers=False,
                                segment_bytes=32 * 1024, seed=3)


@pytest.fixture(scope="session")
def dirty(tmp_path_factory):
    directory = tmp_path_factory.mktemp("dirty") / "data"
    return directory, generate(directory, DIRTY)


@pytest.fixture(scope="session")
def clean(tmp_path_factory):
    directory = tmp_path_factory.mktemp("clean") / "data"
    return directory, generate(directory, CLEAN)


def offset_commit_record(group: str) -> LogRecord:
    """Offset 5 of t-0, committed outside any generation, as Kafka writes it."""
    record = records.new_offset_commit_record(group, "t", 0, records.OffsetCommitValue(5, -1, "", 1))
    return LogRecord(records.serialize_key(record.key), records.serialize_value(record.value))


def consumer_group_record(group: str, value: bytes | None) -> LogRecord:
    """A KIP-848 group's metadata record (type 3) with the given value (None: a tombstone)."""
    key = records.CONSUMER_GROUP_METADATA_KEY_TYPE.to_bytes(2, "big") + len(group).to_bytes(2, "big") + group.encode()
    return LogRecord(key, value)
