"""The Parquet tables of an audit report and their Arrow schemas.

    commit_history/part-<p>.parquet   every OffsetCommit record (tombstones: offset null),
                                      written by the task of partition p
    final_offsets.parquet             the committed offsets after replay (+ upstream bounds, lag)
    groups.parquet                    each group's last GroupMetadata
    findings.parquet                  every finding
    group_history.parquet             every GroupMetadata record: rebalances (generation null: deleted)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from coordinator.offline.audit import HISTORY_COLUMNS

COMMIT_HISTORY_DIR = "commit_history"

COMMIT_HISTORY = pa.schema([
    ("log_partition", pa.int32()), ("record_offset", pa.int64()), ("timestamp_ms", pa.int64()),
    ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("leader_epoch", pa.int32()), ("metadata", pa.string()), ("commit_timestamp_ms", pa.int64()),
    ("expire_timestamp_ms", pa.int64()), ("member_id", pa.string()), ("generation", pa.int32()),
    ("client_id", pa.string()), ("client_host", pa.string()),
])
assert tuple(COMMIT_HISTORY.names) == HISTORY_COLUMNS

FINAL_OFFSETS = pa.schema([
    ("log_partition", pa.int32()), ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("leader_epoch", pa.int32()), ("metadata", pa.string()),
    ("commit_timestamp_ms", pa.int64()), ("expire_timestamp_ms", pa.int64()), ("record_offset", pa.int64()),
    ("timestamp_ms", pa.int64()), ("member_id", pa.string()), ("generation", pa.int32()),
    ("client_id", pa.string()), ("client_host", pa.string()), ("log_start_offset", pa.int64()),
    ("log_end_offset", pa.int64()), ("lag", pa.int64()), ("topic_id", pa.string()),
])

GROUPS = pa.schema([
    ("log_partition", pa.int32()), ("group", pa.string()), ("state", pa.string()),
    ("protocol_type", pa.string()), ("protocol", pa.string()), ("generation", pa.int32()),
    ("leader", pa.string()), ("members", pa.int32()), ("current_state_timestamp_ms", pa.int64()),
    ("metadata_record_offset", pa.int64()), ("offsets", pa.int32()),
])

GROUP_HISTORY = pa.schema([
    ("log_partition", pa.int32()), ("group", pa.string()), ("record_offset", pa.int64()), ("timestamp_ms", pa.int64()),
    ("generation", pa.int32()), ("members", pa.int32()), ("protocol", pa.string()), ("leader", pa.string()),
])

FINDINGS = pa.schema([
    ("type", pa.string()), ("log_partition", pa.int32()), ("group", pa.string()), ("topic", pa.string()),
    ("partition", pa.int32()), ("record_offset", pa.int64()), ("committed_offset", pa.int64()),
    ("previous_offset", pa.int64()), ("timestamp_ms", pa.int64()), ("member_id", pa.string()),
    ("generation", pa.int32()), ("client_id", pa.string()), ("client_host", pa.string()),
    ("segment", pa.string()), ("position", pa.int64()), ("detail", pa.string()),
])


def history_part(report_dir: Path, partition: int) -> Path:
    return Path(report_dir) / COMMIT_HISTORY_DIR / f"part-{partition:05d}.parquet"


def write_columns(path: Path, schema: pa.Schema, columns: dict[str, list | pa.Array]) -> None:
    """A large table (the commit history): strings and int32 columns (names, partitions,
    generations) repeat, so they get dictionaries (a string column given as a dictionary
    array is written as it is); int64 columns are offsets and times, near their
    neighbours, which delta encoding packs smaller than a compressor would, and much
    faster than trying a dictionary of mostly distinct values. Read back, every column
    has `schema`'s type (the Arrow schema is not stored, so no dictionary type either)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dictionary = [f.name for f in schema if f.type in (pa.string(), pa.int32())]
    delta = {f.name: "DELTA_BINARY_PACKED" for f in schema if f.type == pa.int64()}
    table = pa.table({f.name: _column(columns[f.name], f.type) for f in schema})
    pq.write_table(table, path, use_dictionary=dictionary, column_encoding=delta, compression="none",
                   store_schema=False)


def _column(values: list | pa.Array, kind: pa.DataType) -> pa.Array:
    if isinstance(values, pa.Array):
        return values if pa.types.is_dictionary(values.type) and values.type.value_type == kind else values.cast(kind)
    return pa.array(values, kind)


def write_rows(path: Path, schema: pa.Schema, rows: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), path)


def read_history(report_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    parts = _history_parts(report_dir)
    if not parts:
        return COMMIT_HISTORY.empty_table() if columns is None else \
            pa.schema([COMMIT_HISTORY.field(c) for c in columns]).empty_table()
    return pa.concat_tables(pq.read_table(p, columns=columns) for p in parts)


def _history_parts(report_dir: Path) -> list[Path]:
    return sorted((Path(report_dir) / COMMIT_HISTORY_DIR).glob("part-*.parquet"))


def commits_per_group(history: dict[str, list | pa.Array]) -> dict[str, int]:
    """Per group, its commits in one partition's history (`AuditResult.history`): counted
    by the partition's task, so the report ranks groups without reading the history back."""
    counts = pc.value_counts(_column(history["group"], pa.string()))
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))


@dataclass(frozen=True, slots=True)
class CommitTimes:
    """What the report's charts draw of the commit history: every group's commits (as the
    partitions' tasks counted them) and, on demand, the times of a few groups' commits.
    Those are read from the history parts of the partitions that hold the groups, and of
    those only the two columns: the history is one row per commit, and reading all of it
    back for a dozen groups' charts took the driver longer than the charts."""

    report_dir: Path
    counts: dict[str, int]
    partitions: dict[str, list[int]]       # the log partitions with each group's commits
    busiest: list[str]                     # the groups by commits, most first (ties by name)

    def times_of(self, groups: Sequence[str]) -> list[np.ndarray]:
        """The commit times of each of `groups`, in log order."""
        times: dict[str, list[np.ndarray]] = {g: [] for g in groups}
        for partition in sorted({p for g in groups for p in self.partitions.get(g, ())}):
            table = pq.read_table(history_part(self.report_dir, partition), columns=["group", "timestamp_ms"])
            for group in groups:
                if partition in self.partitions.get(group, ()):
                    mask = pc.equal(table["group"], group)
                    times[group].append(table["timestamp_ms"].filter(mask).to_numpy())
        return [np.concatenate(times[g]) if times[g] else np.zeros(0, np.int64) for g in groups]


def commit_times(report_dir: Path, per_partition: Sequence[tuple[int, dict[str, int]]]) -> CommitTimes:
    """`CommitTimes` of a report from each partition's `commits_per_group`."""
    counts: dict[str, int] = {}
    partitions: dict[str, list[int]] = {}
    for partition, per_group in per_partition:
        for group, n in per_group.items():
            counts[group] = counts.get(group, 0) + n
            partitions.setdefault(group, []).append(partition)
    busiest = sorted((g for g, n in counts.items() if n), key=lambda g: (-counts[g], g))
    return CommitTimes(Path(report_dir), counts, partitions, busiest)
