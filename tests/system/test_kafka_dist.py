"""The suite's Kafka jars come from a cache keyed by version: once fetched, nothing asks Maven
again (CI's second run on a machine downloads nothing)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.kafka_dist import KAFKA_OLD_VERSIONS, KAFKA_VERSION, kafka_lib


def test_a_cached_version_is_served_without_maven():
    for version in (KAFKA_VERSION, *KAFKA_OLD_VERSIONS):
        kafka_lib(version)   # fetched now if this machine never had it
    # No mvn on PATH: a fetch would fail, so passing means nothing was fetched.
    bare_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                if not os.path.exists(os.path.join(p, "mvn")))
    done = subprocess.run([sys.executable, "-m", "tests.support.kafka_dist"], capture_output=True, text=True,
                          env={**os.environ, "PATH": bare_path}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert all(f"Kafka {version}:" in done.stdout for version in (KAFKA_VERSION, *KAFKA_OLD_VERSIONS))


def test_without_maven_an_uncached_version_says_what_is_missing(tmp_path):
    bare_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                if not os.path.exists(os.path.join(p, "mvn")))
    done = subprocess.run([sys.executable, "-m", "tests.support.kafka_dist", "4.3.0"], capture_output=True, text=True,
                          env={**os.environ, "PATH": bare_path, "KGC_KAFKA_CACHE": str(tmp_path)}, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("kafka_dist: Maven (mvn) is not installed") and "Traceback" not in done.stderr
