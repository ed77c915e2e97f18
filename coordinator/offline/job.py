"""The work of one partition, in this process: what a Spark task (or the local runner) runs.

`run_partition(task)` reads the partition's segments once (into numpy columns, or batch
by batch: `Options.scanner`) and, as the task asks, audits them (writing the partition's
commit-history Parquet part itself) and compacts them (writing the partition's new
segments itself). It returns a `PartitionResult`: findings,
final offsets, groups and counts, small next to the data. Nothing is shuffled and no
record crosses into the JVM.

Paths in a task must be readable and writable where the task runs: local disks in local
mode, a shared file system on a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from coordinator.offline.audit import AuditResult, LogOffsets, PartitionAudit, TopicIds
from coordinator.offline.compact import CompactionRefused, compact_partition
from coordinator.offline.findings import Finding
from coordinator.offline.scan import PartitionScan, ScannedBatch
from storage.compaction import CompactionStats

DEFAULT_SCANNER = "columns" if find_spec("numpy") and find_spec("pyarrow") else "records"


@dataclass(frozen=True, slots=True)
class Options:
    """What every partition's task of one run shares: the time it runs as, and the retentions."""

    now_ms: int
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    delete_retention_ms: int = 24 * 3600 * 1000
    segment_bytes: int = 100 * 2**20
    # "columns": every record of a partition at once, with numpy (`columns`; needs the
    # spark extra's numpy and pyarrow); "records": batch by batch through storage.format,
    # the reference the columnar scan is tested against.
    scanner: str = field(default_factory=lambda: DEFAULT_SCANNER)
    # The audit's window: records from since_ms on are reported; records from until_ms on
    # are not read (the log as it was then). None: no bound.
    since_ms: int | None = None
    until_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionTask:
    partition: int
    directory: str
    options: Options
    report_dir: str | None = None           # audit into this report dir
    log_offsets: LogOffsets | None = None
    topic_ids: TopicIds | None = None       # the upstream's topic ids, with log_offsets
    compact_dir: str | None = None          # compact into this new data dir


@dataclass(slots=True)
class PartitionResult:
    partition: int
    findings: list[Finding] = field(default_factory=list)
    final_offsets: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    rebalances: list[dict] = field(default_factory=list)
    records: int = 0
    skipped_records: int = 0
    commits: int = 0
    commits_per_group: dict[str, int] = field(default_factory=dict)    # in the report's commit history
    bytes_read: int = 0
    tail_bytes: int = 0
    next_offset: int = 0
    compaction: CompactionStats | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0        # of this process (threads included): contention does not count


def run_partition(task: PartitionTask) -> PartitionResult:
    cpu_started = time.process_time()
    result = _run_columns(task) if task.options.scanner == "columns" else _run_records(task)
    result.cpu_seconds = time.process_time() - cpu_started
    return result


def _run_records(task: PartitionTask) -> PartitionResult:
    started = time.perf_counter()
    scan = PartitionScan(task.partition, Path(task.directory))
    audit = None
    options = task.options
    if task.report_dir is not None:
        audit = partition_audit(task)
    compact_dir = task.compact_dir
    kept: list[ScannedBatch] = []
    for scanned in scan:
        if audit is not None:
            audit.add(scanned)
        if compact_dir is not None:
            kept.append(scanned)
    result = PartitionResult(task.partition, bytes_read=scan.bytes_read, tail_bytes=scan.tail_bytes,
                             next_offset=scan.next_offset)
    if audit is not None:
        audited_into(result, audit.finish(scan.problems + scan.evidence), task)
    else:
        result.findings = scan.problems + scan.evidence
    if compact_dir is not None:
        if scan.problems:
            raise CompactionRefused(task.partition, scan.problems)
        out = Path(compact_dir) / Path(task.directory).name
        result.compaction = compact_partition(kept, scan.next_offset, out, options.now_ms,
                                              options.delete_retention_ms, options.segment_bytes)
        result.records = result.records or result.compaction.records_before
    result.seconds = time.perf_counter() - started
    return result


def audit_batches(task: PartitionTask, batches: Iterable[ScannedBatch]) -> PartitionResult:
    """The audit of one partition's batches from elsewhere than its segment files (a
    Kafka topic through Spark: `kafka_source`), into the same result as a file run."""
    started = time.perf_counter()
    audit = partition_audit(task)
    next_offset = 0
    for scanned in batches:
        audit.add(scanned)
        next_offset = scanned.batch.last_offset + 1
    result = PartitionResult(task.partition, next_offset=next_offset)
    audited_into(result, audit.finish(), task)
    result.seconds = time.perf_counter() - started
    return result


def partition_audit(task: PartitionTask) -> PartitionAudit:
    options = task.options
    return PartitionAudit(task.partition, options.now_ms, options.offsets_retention_ms, task.log_offsets,
                          since_ms=options.since_ms, until_ms=options.until_ms, topic_ids=task.topic_ids)


def audited_into(result: PartitionResult, audited: AuditResult, task: PartitionTask) -> None:
    result.findings = audited.findings
    result.final_offsets = audited.final_offsets
    result.groups = audited.groups
    result.rebalances = audited.rebalances
    result.records = audited.records
    result.skipped_records = audited.skipped_records
    result.commits = len(audited.history["record_offset"])
    if result.commits:
        if task.report_dir is None:
            raise ValueError(f"partition {task.partition}: an audit's task names no report dir for its commits")
        from coordinator.offline.tables import COMMIT_HISTORY, commits_per_group, history_part, write_columns
        write_columns(history_part(Path(task.report_dir), task.partition), COMMIT_HISTORY, audited.history)
        result.commits_per_group = commits_per_group(audited.history)


def _run_columns(task: PartitionTask) -> PartitionResult:
    from coordinator.offline.column_audit import audit_columns
    from coordinator.offline.column_compact import compact_columns
    from coordinator.offline.columns import scan_columns

    started = time.perf_counter()
    options = task.options
    cols = scan_columns(task.partition, Path(task.directory))
    scan = cols.scan
    result = PartitionResult(task.partition, bytes_read=scan.bytes_read, tail_bytes=scan.tail_bytes,
                             next_offset=scan.next_offset)
    if task.report_dir is not None:
        audit = partition_audit(task)
        audited_into(result, audit_columns(cols, audit), task)
    else:
        result.findings = scan.problems + scan.evidence
    if task.compact_dir is not None:
        if scan.problems:
            raise CompactionRefused(task.partition, scan.problems)
        out = Path(task.compact_dir) / Path(task.directory).name
        result.compaction = compact_columns(cols, out, options.now_ms, options.delete_retention_ms,
                                            options.segment_bytes)
        result.records = result.records or result.compaction.records_before
    result.seconds = time.perf_counter() - started
    return result
