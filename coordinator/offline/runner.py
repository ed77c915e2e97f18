"""Plan the per-partition tasks of an audit or compaction, run them, gather the results.

The engine is a map: `local_map` runs the tasks one after another in this process (the
plain-Python run, no pyspark needed); `spark_engine.spark_map` gives each task to Spark.
Everything else, planning and the report, is the same code either way, so the two
produce the same report and byte-identical segments.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from coordinator.offline.audit import LogOffsets, TopicIds
from coordinator.offline.job import Options, PartitionResult, PartitionTask, run_partition
from coordinator.offline.scan import segment_files
from storage.file_store import partition_dirs

log = logging.getLogger(__name__)

# (the function, its tasks, called with the number of tasks done as they finish) -> results
TaskMap = Callable[[Callable[[PartitionTask], PartitionResult], Sequence[PartitionTask],
                    Callable[[int], None] | None], list[PartitionResult]]

COMPACTED_MARKER = "COMPACTED.json"


def local_map(fn: Callable[[PartitionTask], PartitionResult], tasks: Sequence[PartitionTask],
              progress: Callable[[int], None] | None = None) -> list[PartitionResult]:
    results = []
    for task in tasks:
        results.append(fn(task))
        if progress is not None:
            progress(len(results))
    return results


def _run(task_map: TaskMap, tasks: list[PartitionTask], label: str | None) -> list[PartitionResult]:
    """The tasks' results by partition; with a label, a progress bar on a terminal."""
    if label is None:
        return sorted(task_map(run_partition, tasks, None), key=lambda r: r.partition)
    from coordinator.offline.progress import Progress

    progress = Progress(len(tasks), label)
    try:
        return sorted(task_map(run_partition, tasks, progress), key=lambda r: r.partition)
    finally:
        progress.close()


def plan(data_dir: str | Path, options: Options) -> list[PartitionTask]:
    dirs = partition_dirs(data_dir)
    if not dirs:
        raise FileNotFoundError(f"{data_dir} holds no __consumer_offsets-<p> directories")
    # Largest first, so the last task to finish is a small one. Absolute paths: a Spark
    # worker's working directory is not ours.
    by_size = sorted(dirs.items(), key=lambda item: -_size(item[1]))
    return [PartitionTask(p, str(d.resolve()), options) for p, d in by_size]


def _size(directory: Path) -> int:
    return sum(path.stat().st_size for _base, path in segment_files(directory))


@dataclass(frozen=True, slots=True)
class AuditRun:
    results: list[PartitionResult]
    summary: dict
    seconds: float


def audit(data_dir: str | Path, report_dir: str | Path, options: Options, task_map: TaskMap = local_map,
          log_offsets: LogOffsets | None = None, upstream: str | None = None,
          progress_label: str | None = None, topic_ids: TopicIds | None = None) -> AuditRun:
    from coordinator.offline.report import write_report

    started = time.perf_counter()
    report_dir = Path(report_dir).resolve()
    _prepare_output(report_dir)
    tasks = [replace(t, report_dir=str(report_dir), log_offsets=log_offsets, topic_ids=topic_ids)
             for t in plan(data_dir, options)]
    results = _run(task_map, tasks, progress_label)
    summary = write_report(report_dir, results, data_dir=str(data_dir), options=options, upstream=upstream)
    return AuditRun(results, summary, time.perf_counter() - started)


def audit_topic(spark, source, report_dir: str | Path, options: Options, log_offsets: LogOffsets | None = None,
                upstream: str | None = None, plan=None, topic_ids: TopicIds | None = None) -> AuditRun:
    """`audit` of a Kafka topic (`kafka_source.TopicSource`) read through Spark's Kafka
    source instead of a data dir: the same per-partition audit and the same report. With
    an `incremental.Plan`, the read it says (from a previous report's offsets on, with its
    records), and the report keeps its offsets and records for the next run."""
    from coordinator.offline import incremental, kafka_source
    from coordinator.offline.report import write_report

    started = time.perf_counter()
    report_dir = Path(report_dir).resolve()
    _prepare_output(report_dir)
    template = PartitionTask(-1, source.topic, options, report_dir=str(report_dir), log_offsets=log_offsets,
                             topic_ids=topic_ids)
    read = None if plan is None else replace(plan.read, keep_records=str(incremental.records_dir(report_dir)))
    topic = kafka_source.audit_topic(spark, source, template, read)
    kafka = None
    if plan is not None:
        kafka = incremental.kafka_summary(source, plan, topic.records_read, topic.records_previous)
    summary = write_report(report_dir, topic.results, data_dir=source.describe(), options=options,
                           upstream=upstream, kafka=kafka,
                           warnings=[] if plan is None else [g.describe(source.topic) for g in plan.gaps])
    if kafka is not None:
        incremental.save(report_dir, kafka)
    return AuditRun(topic.results, summary, time.perf_counter() - started)


@dataclass(frozen=True, slots=True)
class CompactRun:
    results: list[PartitionResult]
    totals: dict
    seconds: float


def compact(data_dir: str | Path, out_dir: str | Path, options: Options,
            task_map: TaskMap = local_map, progress_label: str | None = None) -> CompactRun:
    started = time.perf_counter()
    out_dir = Path(out_dir).resolve()
    if Path(data_dir).resolve() == out_dir:
        raise ValueError("compaction writes a new data dir; --out must differ from the input")
    _prepare_output(out_dir)
    tasks = [replace(t, compact_dir=str(out_dir)) for t in plan(data_dir, options)]
    results = _run(task_map, tasks, progress_label)
    totals: dict[str, int] = {}
    for r in results:
        if r.compaction is None:
            raise RuntimeError(f"partition {r.partition}: its compaction task returned no compaction")
        for name, value in asdict(r.compaction).items():
            totals[name] = totals.get(name, 0) + value
    # Written last: a data dir without it is an unfinished compaction.
    marker = {"input": str(Path(data_dir).resolve()), "now_ms": options.now_ms,
              "delete_retention_ms": options.delete_retention_ms, "partitions": len(results), **totals}
    tmp = out_dir / (COMPACTED_MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=1))
    os.replace(tmp, out_dir / COMPACTED_MARKER)
    return CompactRun(results, totals, time.perf_counter() - started)


def _prepare_output(directory: Path) -> None:
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory} exists and is not empty")
    directory.mkdir(parents=True, exist_ok=True)
