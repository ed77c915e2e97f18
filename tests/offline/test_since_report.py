"""`kgc audit --bootstrap ... --since-report PREVIOUS_OUT`: nightly runs that read from Kafka
only what was written since the last one, on a real broker through Spark (`local[2]`).

Real kafka-python consumers commit (regressions, a rejoin, a deleted group, transactions
committed and aborted); a first full run audits that; more commits follow, among them a
regression below a commit only the first run read. The second run, going on from the
first's report, must find exactly what a full run over the same topic finds (every table
of the report the same) having read from Kafka only the records written in between. On a
topic whose first records are deleted between two runs, the gap is reported and the
records the first run kept are still judged. A report that cannot be gone on from is
refused in one line before any Spark starts. Without Spark: test_incremental.py.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")
pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from kafka import KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

from coordinator import records  # noqa: E402
from coordinator.partitioning import partition_for  # noqa: E402
from tests.support.kafka import KafkaCluster  # noqa: E402
from tests.support.kafka_dist import spark_kafka_jars  # noqa: E402
from tests.support.topic_audit import audited, commit, kgc_audit, member, produce  # noqa: E402

# Three Spark runs of `kgc audit` in the first test's set-up: 20 to 45 s each on two quiet
# cores, twice that on busy ones.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

EVENTS = "events"              # 2 partitions, 10 records each
STATE = "audited-state"        # records in the __consumer_offsets format, produced here
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 5         # the test brokers' offsets.topic.num.partitions


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("kafka-since")) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.create_topics([NewTopic(EVENTS, 2, 1), NewTopic(STATE, 1, 1)])
        finally:
            admin.close()
        for p in (0, 1):
            produce(cluster.bootstrap, EVENTS, p, 10)
        yield cluster


@pytest.fixture(scope="module")
def jars() -> str:
    return ",".join(spark_kafka_jars(pyspark.__version__))


def commits(bootstrap: str, group: str, *offsets: tuple[int, int]) -> None:
    """`group` joins (a rebalance) and commits (partition, offset) of EVENTS in turn."""
    consumer = member(bootstrap, group, EVENTS)
    try:
        for partition, offset in offsets:
            commit(consumer, EVENTS, partition, offset)
    finally:
        consumer.close()


def transactions(bootstrap: str, group: str, transactional_id: str, committed: int, aborted: int) -> None:
    consumer = member(bootstrap, group, EVENTS)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    try:
        producer.init_transactions()
        for offset, end in ((committed, producer.commit_transaction), (aborted, producer.abort_transaction)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction({TopicPartition(EVENTS, 0): OffsetAndMetadata(offset, "", -1)},
                                                 consumer.group_metadata())
            end()
    finally:
        producer.close()
        consumer.close()


def audit(cluster, jars: str, out: Path, *args: str) -> set[tuple]:
    result = kgc_audit("--bootstrap", cluster.bootstrap, "--master", "local[2]", "--spark-jars", jars,
                       "--out", str(out), *args)
    return audited(result, out)


def summary(report: Path) -> dict:
    return json.loads((report / "summary.json").read_text())


def table(path: Path) -> list[dict]:
    """A report's table (a file, or a directory of parts), its rows in one order."""
    return sorted(pq.read_table(path).to_pylist(), key=repr)


@pytest.fixture(scope="module")
def nightly(cluster, jars, tmp_path_factory):
    """Run 1 (full) after the first commits; after more, run 2 since run 1's report and
    run 3 (full) over the same topic, both as of one time."""
    bootstrap, reports = cluster.bootstrap, tmp_path_factory.mktemp("nightly")
    commits(bootstrap, "steady", (0, 5), (1, 5))
    commits(bootstrap, "regress", (0, 8), (0, 3))
    commits(bootstrap, "crossing", (1, 9))
    commits(bootstrap, "gone", (0, 1))
    commits(bootstrap, "quiet", (0, 7))             # its partition gets nothing new for run 2
    transactions(bootstrap, "txn", "since-txn-1", committed=4, aborted=9)
    started = time.perf_counter()
    audit(cluster, jars, reports / "run-1")
    seconds = {"run-1": time.perf_counter() - started}

    commits(bootstrap, "crossing", (1, 4))           # below the 9 only run 1 read
    commits(bootstrap, "regress", (0, 2))
    commits(bootstrap, "steady", (0, 10), (1, 10))
    commits(bootstrap, "ahead", (1, 1000))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_groups(["gone"])       # tombstones for what run 1 read
    finally:
        admin.close()
    transactions(bootstrap, "txn", "since-txn-2", committed=6, aborted=2)
    now_ms = str(int(time.time() * 1000))
    for run, args in (("run-2", ("--since-report", str(reports / "run-1"))), ("run-3", ())):
        started = time.perf_counter()
        audit(cluster, jars, reports / run, "--now-ms", now_ms, *args)
        seconds[run] = time.perf_counter() - started
    print(f"audit seconds: {seconds}")
    return reports


def test_a_run_since_the_last_report_finds_what_a_full_run_finds(cluster, nightly):
    first, since, full = nightly / "run-1", nightly / "run-2", nightly / "run-3"
    # given the same topic, read to the same ends by both
    assert summary(since)["kafka"]["read_to"] == summary(full)["kafka"]["read_to"]
    # then the run since the last report reports what the full run does, table for table
    found = table(since / "findings.parquet")
    assert found == table(full / "findings.parquet")
    for name in ("final_offsets.parquet", "groups.parquet", "group_history.parquet", "commit_history"):
        assert table(since / name) == table(full / name), name
    assert {k: v for k, v in summary(since).items() if k != "kafka"} == \
        {k: v for k, v in summary(full).items() if k != "kafka"}
    # among them a regression below a commit that only the first run read from Kafka
    regressions = {(f["group"], f["partition"], f["previous_offset"], f["committed_offset"])
                   for f in found if f["type"] == "offset_regression"}
    assert regressions == {("regress", 0, 8, 3), ("regress", 0, 3, 2), ("crossing", 1, 9, 4)}
    assert ("offset_above_log_end", "ahead") in {(f["type"], f["group"]) for f in found}
    assert "gone" not in {row["group"] for row in table(since / "final_offsets.parquet")}
    # and audits the partition nothing was written to since from its kept records alone
    quiet = partition_for("quiet", OFFSETS_PARTITIONS)
    assert quiet not in {partition_for(g, OFFSETS_PARTITIONS)
                         for g in ("crossing", "regress", "steady", "ahead", "gone", "txn")}
    assert ("quiet", quiet) in {(row["group"], row["log_partition"]) for row in table(since / "groups.parquet")}
    # and keeps the same records for the next run as the full run
    assert table(since / "kafka" / "records") == table(full / "kafka" / "records")
    assert "written since the previous report" in (since / "report.html").read_text()
    assert summary(first)["kafka"]["cluster_id"] == cluster.cluster_id


def test_a_run_since_the_last_report_reads_only_what_was_written_since(nightly):
    first, since, full = (summary(nightly / run)["kafka"] for run in ("run-1", "run-2", "run-3"))
    assert first["read_from"] == full["read_from"] == "earliest"
    assert since["read_from"] == first["read_to"]
    assert since["since_report"] == str((nightly / "run-1").resolve())
    # every record run 1 read comes from its report, none from Kafka again
    assert since["records_previous"] == first["records_read"] == first["records_kept"]
    assert 0 < since["records_read"] == full["records_read"] - first["records_read"]
    assert since["records_kept"] == full["records_kept"] == full["records_read"]
    assert since["gaps"] == [] and summary(nightly / "run-2")["warnings"] == []


def state_record(producer: KafkaProducer, group: str, offset: int) -> None:
    """An OffsetCommit of `group` for EVENTS-0, in the __consumer_offsets format."""
    record = records.new_offset_commit_record(group, EVENTS, 0, records.OffsetCommitValue(offset, -1, "", 1),
                                              member_id="m", generation=1, client_id="c")
    producer.send(STATE, key=records.serialize_key(record.key), value=records.serialize_value(record.value),
                  headers=list(record.headers), partition=0).get(timeout=30)


def test_records_deleted_between_runs_are_reported_and_the_kept_ones_still_judged(cluster, jars, tmp_path):
    bootstrap = cluster.bootstrap
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        # given a run over five commits of a state topic (offsets 0 to 4)
        for offset in (10, 20, 30, 40, 50):
            state_record(producer, "kept", offset)
        audit(cluster, jars, tmp_path / "run-1", "--topic", STATE)
        # and two more commits (5, 6) deleted with all before them, then one below them all (7)
        for offset in (60, 70, 15):
            state_record(producer, "kept", offset)
        admin.delete_records({TopicPartition(STATE, 0): 7})
        # when the next run goes on from the first
        result = kgc_audit("--bootstrap", bootstrap, "--topic", STATE, "--master", "local[2]", "--spark-jars", jars,
                           "--since-report", str(tmp_path / "run-1"), "--out", str(tmp_path / "run-2"))
        found = audited(result, tmp_path / "run-2")
        # then it says which records no run read, and goes on
        gap = f"{STATE}-0: offsets 5 to 6 were deleted (retention or DeleteRecords) before any audit read them"
        assert f"warning: {gap}" in result.stderr
        report = summary(tmp_path / "run-2")
        assert [w.split(";")[0] for w in report["warnings"]] == [gap]
        assert report["kafka"]["gaps"] == [{"partition": 0, "read_to": 5, "log_start": 7}]
        assert (report["kafka"]["read_from"], report["kafka"]["records_read"]) == ({"0": 7}, 1)
        assert gap in (tmp_path / "run-2" / "report.html").read_text()
        # and judges the new commit against the ones the first run kept (a full run now has
        # only offset 7 to read)
        assert ("offset_regression", "kept", EVENTS, 0, 15) in found
        # a topic that has more partitions since is refused
        admin.create_partitions({STATE: NewPartitions(total_count=2)})
        refused = kgc_audit("--bootstrap", bootstrap, "--topic", STATE, "--since-report", str(tmp_path / "run-2"),
                            "--out", str(tmp_path / "run-3"))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr == (f"kgc audit: --since-report {tmp_path / 'run-2'} read {STATE} with 1 partitions, "
                                  "it has 2 now: run without --since-report for a full audit\n")
    finally:
        producer.close()
        admin.close()


def edited(report: Path, to: Path, **changes) -> str:
    """A copy of `report` whose saved offsets say otherwise."""
    shutil.copytree(report, to)
    offsets = to / "kafka" / "offsets.json"
    offsets.write_text(json.dumps({**json.loads(offsets.read_text()), **changes}))
    return str(to)


@pytest.mark.parametrize("case", ["no saved offsets", "other topic", "other cluster", "partition count",
                                  "beyond the end", "no --bootstrap"])
def test_a_report_that_cannot_be_gone_on_from_is_refused_in_one_line(cluster, nightly, tmp_path, case):
    first = nightly / "run-1"
    args = ["--bootstrap", cluster.bootstrap]
    if case == "no saved offsets":
        previous, refusal = str(tmp_path), "has no saved Kafka offsets (kafka/offsets.json)"
    elif case == "other topic":
        previous, refusal = str(first), f"audited topic {OFFSETS_TOPIC}, not {STATE}"
        args += ["--topic", STATE]
    elif case == "other cluster":
        previous = edited(first, tmp_path / "copy", cluster_id="another-cluster")
        refusal = f"read another cluster: cluster another-cluster ({cluster.bootstrap}), not cluster {cluster.cluster_id}"
    elif case == "partition count":
        previous, refusal = edited(first, tmp_path / "copy", partitions=50), "with 50 partitions, it has 5 now"
    elif case == "beyond the end":
        read_to = json.loads((first / "kafka" / "offsets.json").read_text())["read_to"]
        previous = edited(first, tmp_path / "copy", read_to={p: o + 1000 for p, o in read_to.items()})
        refusal = "beyond its end now (partition 0: "
    else:
        previous, refusal, args = str(first), "--since-report goes on from an audit of a topic", [str(tmp_path)]
    out = tmp_path / "out"
    result = kgc_audit(*args, "--since-report", previous, "--out", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("kgc audit: ") and result.stderr.count("\n") == 1, result.stderr
    assert refusal in result.stderr
    assert not out.exists()
