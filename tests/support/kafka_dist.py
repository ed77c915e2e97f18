"""Apache Kafka's jars from Maven Central, in a cache keyed by version.

`kafka_lib(version)` returns a directory holding every runtime jar of one Kafka version's
broker, tools, clients and Streams plus a log4j2 binding (tests/kafka/pom.xml says which),
fetching them with Maven on first use. Maven's own repository (~/.m2) keeps the downloads,
and a version's directory is marked complete only once every jar is copied, so a second run
on the same machine asks Maven for nothing. `.ci/run` warms the cache through `main()`.
`spark_kafka_jars(version)` does the same for Spark's Kafka source (tests/spark/pom.xml).

`KGC_KAFKA_CACHE` moves the cache (default ~/.cache/kgc/kafka).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# The version the suite runs against, and the older ones it runs a smaller set on: the last
# 3.x line (kgc brings KIP-848 consumer groups to a cluster that has none of its own) and the
# first 4.x line, the oldest a team on Kafka 4 runs.
KAFKA_VERSION = "4.4.0"
KAFKA_OLD_VERSIONS = ("3.9.1", "4.0.2")

POM = Path(__file__).resolve().parent.parent / "kafka" / "pom.xml"
SPARK_POM = POM.parent.parent / "spark" / "pom.xml"
LOG4J2_CONFIG = POM.parent / "log4j2.properties"
_DONE = ".complete"
# Clients and tools: a JVM that starts in about a second (a member restarted within its
# session must be back before the session ends, as an application's would).
CLIENT_JVM = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
FETCH_TIMEOUT_S = 900


class KafkaUnavailable(RuntimeError):
    """Kafka's jars could not be had (no Maven, or Maven Central refused)."""


def cache_root() -> Path:
    return Path(os.environ.get("KGC_KAFKA_CACHE", Path.home() / ".cache" / "kgc" / "kafka"))


def kafka_lib(version: str = KAFKA_VERSION) -> Path:
    return _maven_lib(POM, cache_root() / version / "lib", {"kafka.version": version}, f"Kafka {version}")


def spark_kafka_jars(spark_version: str) -> list[str]:
    """Spark's Kafka source at `spark_version` and the jars it needs that PySpark does not
    ship (tests/spark/pom.xml): what `spark.jars` takes. A jar PySpark has in another
    version (Scala, Hadoop, slf4j ...) is left out, so Spark's own one is the one loaded."""
    lib = _maven_lib(SPARK_POM, cache_root() / f"spark-sql-kafka-{spark_version}" / "lib",
                     {"spark.version": spark_version}, f"spark-sql-kafka {spark_version}")
    import pyspark

    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(j) for j in lib.glob("*.jar") if _artifact(j.name) not in shipped)


def _artifact(jar_name: str) -> str:
    """`lz4-java-1.10.1.jar` -> `lz4-java`."""
    return re.sub(r"-\d[\w.]*\.jar$", "", jar_name)


def _maven_lib(pom: Path, lib: Path, properties: dict[str, str], what: str) -> Path:
    if (lib / _DONE).exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(f"Maven (mvn) is not installed: it fetches {what}'s jars for the tests")
    if lib.exists():
        shutil.rmtree(lib)  # a fetch that stopped half-way: start it again
    lib.mkdir(parents=True)
    cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
           *(f"-D{k}={v}" for k, v in properties.items()), "-DincludeScope=runtime", f"-DoutputDirectory={lib}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    if done.returncode != 0:
        raise KafkaUnavailable(f"mvn could not fetch {what} (exit {done.returncode}):\n"
                               f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    (lib / _DONE).write_text(" ".join(properties.values()) + "\n")
    return lib


def classpath(version: str = KAFKA_VERSION) -> str:
    return str(kafka_lib(version) / "*")


def compiled(source: Path, version: str = KAFKA_VERSION) -> str:
    """The classpath to run `source` (a one-file Java program of the tests) against this Kafka
    version's jars: compiled once per version and content, since the JVM's source launcher
    would compile it again in every process (seconds of CPU, where a test restarts members)."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    classes = cache_root() / version / "classes" / f"{source.stem}-{digest}"
    if not (classes / _DONE).exists():
        classes.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["javac", "-cp", classpath(version), "-d", str(classes), str(source)],
                              capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
        if done.returncode != 0:
            raise KafkaUnavailable(f"javac {source.name} failed:\n{done.stdout}{done.stderr}")
        (classes / _DONE).write_text(str(source) + "\n")
    return f"{classes}{os.pathsep}{classpath(version)}"


def java_command(main_class: str, *args: str, version: str = KAFKA_VERSION, jvm: tuple[str, ...] = CLIENT_JVM,
                 cp: str | None = None) -> list[str]:
    """A JVM running `main_class` of this Kafka version's jars (or of `cp`), logging as
    tests/kafka/log4j2.properties says (warnings, to stderr)."""
    return ["java", *jvm, f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}", "-cp", cp or classpath(version),
            main_class, *args]


def run_tool(main_class: str, *args: str, version: str = KAFKA_VERSION,
             timeout_s: float = 120) -> subprocess.CompletedProcess:
    """One of Kafka's command-line tools (kafka-consumer-groups is ConsumerGroupCommand ...)."""
    return subprocess.run(java_command(main_class, *args, version=version), capture_output=True, text=True,
                          timeout=timeout_s)


def main(argv: list[str]) -> int:
    for version in argv or [KAFKA_VERSION, *KAFKA_OLD_VERSIONS]:
        try:
            print(f"Kafka {version}: {kafka_lib(version)}", flush=True)
        except KafkaUnavailable as exc:
            print(f"kafka_dist: {exc}", file=sys.stderr)
            return 1
    try:
        import pyspark
    except ImportError:
        return 0
    try:
        print(f"spark-sql-kafka {pyspark.__version__}: {len(spark_kafka_jars(pyspark.__version__))} jars", flush=True)
    except KafkaUnavailable as exc:
        print(f"kafka_dist: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
