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


@dataclass(frozen=True, slots=True)
class CommitTimes:
    """Every commit's group (an index into `groups`) and time: what the report's charts
    draw, read as numbers rather than millions of strings."""

    groups: list[str]
    code: np.ndarray
    timestamp_ms: np.ndarray
    busiest: list[str]           # the groups by commits, most first (ties by name)

    def times_of(self, groups: Sequence[str]) -> list[np.ndarray]:
        """The commit times of each of `groups`, in one pass over the commits."""
        index = {g: i for i, g in enumerate(self.groups)}
        place = np.full(len(self.groups), -1, np.int64)
        for number, group in enumerate(groups):
            if group in index:
                place[index[group]] = number
        where = place[self.code]
        picked = np.flatnonzero(where >= 0)
        stamps, owner = self.timestamp_ms[picked], where[picked]
        return [stamps[owner == number] for number in range(len(groups))]


def read_commit_times(report_dir: Path) -> CommitTimes:
    parts = _history_parts(report_dir)
    # The group column as a dictionary per part, unified into one: codes, not strings.
    table = pa.concat_tables(pq.read_table(p, columns=["group", "timestamp_ms"], read_dictionary=["group"])
                             for p in parts).unify_dictionaries() if parts else None
    if table is None or not table["group"].num_chunks:
        return CommitTimes([], np.zeros(0, np.int32), np.zeros(0, np.int64), [])
    column = table["group"]
    groups = column.chunk(0).dictionary.to_pylist()
    code = np.concatenate([c.indices.to_numpy() for c in column.chunks])
    counts = np.bincount(code, minlength=len(groups)).tolist()
    busiest = sorted((i for i in range(len(groups)) if counts[i]), key=lambda i: (-counts[i], groups[i]))
    return CommitTimes(groups, code, table["timestamp_ms"].to_numpy(), [groups[i] for i in busiest])
