"""Fixtures for the offline audit and compaction tests.

`spark` is one SparkSession for the whole run, on `local[1]` (loopback, UI off, two
shuffle partitions: `spark_engine.session`), skipped when pyspark or Java is missing.
The generated data dirs are made once per run and only read by the tests.
"""

from __future__ import annotations

import os
import shutil

import pytest

from coordinator.offline.generate import generate
from tests.support.audit_logs import CLEAN, DIRTY


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")
    from coordinator.offline.spark_engine import session

    spark = session("local[1]")
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def dirty(tmp_path_factory):
    directory = tmp_path_factory.mktemp("dirty") / "data"
    return directory, generate(directory, DIRTY)


@pytest.fixture(scope="session")
def clean(tmp_path_factory):
    directory = tmp_path_factory.mktemp("clean") / "data"
    return directory, generate(directory, CLEAN)
