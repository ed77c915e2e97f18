"""`kgc audit --since-report` without Spark or Kafka: a partition audited in two runs, the
second going on from the records the first kept, must be audited as in one run; and the
plan of a run from a previous report's offsets (where it starts, the gaps it reports, the
reports it refuses). The same on a real broker through Spark: test_since_report.py."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator.offline import incremental, kafka_source  # noqa: E402
from coordinator.offline.generate import GeneratorConfig, generate  # noqa: E402
from coordinator.offline.incremental import Gap, Refused  # noqa: E402
from coordinator.offline.job import Options, PartitionTask  # noqa: E402
from coordinator.offline.kafka_source import TopicRead, TopicSource, records_part  # noqa: E402
from coordinator.offline.upstream import TopicOffsets  # noqa: E402
from storage.file_store import partition_dirs  # noqa: E402
from tests.support.topic_rows import as_spark_rows, comparable  # noqa: E402

# Regressions, stale generations, deleted groups, retention: findings that need the
# records before the split to be judged after it.
CONFIG = GeneratorConfig(records=3_000, groups=12, num_partitions=2, segment_bytes=32 * 1024)
TOPIC = "t"


def audited(batches, template: PartitionTask, read: TopicRead | None = None):
    [out] = kafka_source._audit_partition(iter(batches), template, TOPIC, read)
    row = out.to_pylist()[0]
    return pickle.loads(row["result"]), row["records_read"], row["records_previous"]


@pytest.mark.parametrize("scanner", ["columns", "records"])
def test_a_partition_audited_in_two_runs_is_audited_as_in_one(tmp_path, scanner):
    data = tmp_path / "data"
    generate(data, CONFIG)
    template = PartitionTask(-1, TOPIC, replace(Options(now_ms=CONFIG.now_ms), scanner=scanner),
                             report_dir=str(tmp_path / "report"))
    first, second, third = (str(tmp_path / name) for name in ("first", "second", "third"))
    for partition, directory in partition_dirs(data).items():
        rows = pa.Table.from_batches(as_spark_rows(partition, directory))
        half = rows.num_rows // 2
        whole, read, _ = audited(rows.to_batches(max_chunksize=700), template)
        assert whole.findings and read == rows.num_rows
        # given a first run over the first half, that keeps its records
        audited(rows.slice(0, half).to_batches(max_chunksize=700), template, TopicRead(keep_records=first))
        # when a second run reads the rest and goes on from them
        result, read, previous = audited(rows.slice(half).to_batches(max_chunksize=700), template,
                                         TopicRead(previous_records=first, keep_records=second))
        # then it reads only the rest, and finds what one run over all of it finds
        assert (read, previous) == (rows.num_rows - half, half)
        assert comparable(result) == comparable(whole)
        assert sorted(map(repr, result.findings)) == sorted(map(repr, whole.findings))
        # and keeps every record, as Spark gave them, for the run after it
        kept = pq.read_table(records_part(second, partition))
        assert kept.to_pylist() == rows.cast(kafka_source.records_schema()).to_pylist()
        # which, with nothing new, audits the kept records alone and keeps the same file
        idle, read, previous = kafka_source._audit_records(
            partition, None, template, TOPIC, TopicRead(previous_records=second, keep_records=third))
        assert (read, previous) == (0, rows.num_rows)
        assert comparable(idle) == comparable(whole)
        assert records_part(third, partition).read_bytes() == records_part(second, partition).read_bytes()


def test_new_records_that_overlap_the_kept_ones_fail_the_task(tmp_path):
    data = tmp_path / "data"
    generate(data, CONFIG)
    template = PartitionTask(-1, TOPIC, Options(now_ms=CONFIG.now_ms), report_dir=str(tmp_path / "report"))
    rows = pa.Table.from_batches(as_spark_rows(0, partition_dirs(data)[0]))
    audited(rows.slice(0, 100).to_batches(), template, TopicRead(keep_records=str(tmp_path / "first")))
    with pytest.raises(RuntimeError, match="previous report's records go up to 99"):
        audited(rows.slice(50).to_batches(), template, TopicRead(previous_records=str(tmp_path / "first")))


SOURCE = TopicSource("kafka-0:9092,kafka-1:9092", "__consumer_offsets")
NOW = TopicOffsets("cluster-a", {0: (0, 40), 1: (0, 25), 2: (10, 30)})


def previous_report(tmp_path, read_to: dict[int, int], source: TopicSource = SOURCE,
                    now: TopicOffsets = NOW, **changes) -> str:
    """A report that read `source` up to `read_to`, as a run leaves it."""
    report = tmp_path / "previous"
    plan = incremental.Plan(now, TopicRead(ending=read_to))
    kafka = {**incremental.kafka_summary(source, plan, records_read=10, records_previous=0), **changes}
    incremental.records_dir(report).mkdir(parents=True)
    incremental.save(report, kafka)
    return str(report)


def test_a_full_run_reads_every_partition_to_its_last_stable_offset():
    plan = incremental.plan(SOURCE, NOW, None)
    assert plan.read == TopicRead(ending={0: 40, 1: 25, 2: 30})
    assert plan.gaps == ()


def test_a_run_since_a_report_reads_from_where_that_one_ended(tmp_path):
    previous = previous_report(tmp_path, {0: 30, 1: 25, 2: 12})
    plan = incremental.plan(SOURCE, NOW, previous)
    assert plan.read == TopicRead(ending={0: 40, 1: 25, 2: 30}, starting={0: 30, 1: 25, 2: 12},
                                  previous_records=str(incremental.records_dir(previous)))
    assert plan.gaps == ()


def test_records_deleted_before_any_run_read_them_are_a_gap_and_the_run_goes_on(tmp_path):
    previous = previous_report(tmp_path, {0: 30, 1: 25, 2: 4})
    plan = incremental.plan(SOURCE, NOW, previous)
    assert plan.read.starting == {0: 30, 1: 25, 2: 10}
    assert plan.gaps == (Gap(2, 4, 10),)
    assert plan.gaps[0].describe("__consumer_offsets").startswith("__consumer_offsets-2: offsets 4 to 9 were deleted")


def test_the_same_cluster_through_other_addresses_is_the_same(tmp_path):
    previous = previous_report(tmp_path, {0: 30, 1: 25, 2: 12}, source=TopicSource("10.0.0.5:9092"))
    assert incremental.plan(SOURCE, NOW, previous).since_report == previous


@pytest.mark.parametrize(("case", "refusal"), [
    ("missing", "no such directory"),
    ("no offsets", "has no saved Kafka offsets (kafka/offsets.json)"),
    ("other topic", "audited topic kgc-state, not __consumer_offsets"),
    ("other cluster", "read another cluster: cluster cluster-b (kafka-0:9092,kafka-1:9092), not cluster cluster-a"),
    ("other servers", "read another cluster: kafka-9:9092, not kafka-0:9092,kafka-1:9092"),
    ("partition count", "read __consumer_offsets with 4 partitions, it has 3 now"),
    ("beyond the end", "beyond its end now (partition 1: 26 > 25): was the topic recreated?"),
    ("no records", "has no kafka/records/"),
])
def test_a_report_that_cannot_be_gone_on_from_is_refused_in_one_line(tmp_path, case, refusal):
    read_to = {0: 30, 1: 25, 2: 12}
    if case == "missing":
        previous = str(tmp_path / "nothing")
    elif case == "no offsets":
        previous = str(tmp_path)
    elif case == "other topic":
        previous = previous_report(tmp_path, read_to, source=TopicSource(SOURCE.bootstrap, "kgc-state"))
    elif case == "other cluster":
        previous = previous_report(tmp_path, read_to, now=replace(NOW, cluster_id="cluster-b"))
    elif case == "other servers":
        previous = previous_report(tmp_path, read_to, source=TopicSource("kafka-9:9092"), cluster_id=None)
    elif case == "partition count":
        previous = previous_report(tmp_path, read_to, partitions=4)
    elif case == "beyond the end":
        previous = previous_report(tmp_path, {**read_to, 1: 26})
    else:
        previous = previous_report(tmp_path, read_to)
        incremental.records_dir(previous).rmdir()
    with pytest.raises(Refused) as refused:
        incremental.plan(SOURCE, NOW if case != "other servers" else replace(NOW, cluster_id=None), previous)
    message = str(refused.value)
    assert refusal in message and "\n" not in message
    assert message.startswith(f"--since-report {previous}")
