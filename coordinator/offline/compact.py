"""Offline compaction of one partition into a new data dir.

Which records survive is `storage.compaction`'s decision, the same rules the online
cleaner applies, here over the whole partition at once (every segment, the active one
too: the output is a fresh log, not a rewrite under a running writer). A batch that
keeps every record is copied byte for byte; one that loses some is re-encoded with its
offsets kept (`format.encode_stored_batch`); one that loses all is dropped.

Output, per partition: segments rolled at `segment_bytes` and named by their first
offset, then an empty active segment named by the input's next offset. That empty
segment keeps the partition's next offset where it was even when compaction dropped
the last batches, so `kgc serve` on the output carries on numbering where the input
stopped. Each file is written whole and fsynced, then the directory.

A partition with integrity problems is refused, as the service refuses to load it:
compaction must not decide which side of a damaged batch is right.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from coordinator.offline.findings import Finding
from coordinator.offline.scan import ScannedBatch
from storage.compaction import compact_batch, latest_offsets
from storage.format import encode_stored_batch
from storage.segment import LOG_SUFFIX, SegmentIO, segment_name


class CompactionRefused(Exception):
    def __init__(self, partition: int, problems: Sequence[Finding]):
        listed = "; ".join(f"{p.type.value} in {p.segment} at byte {p.position}" for p in problems[:5])
        more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
        super().__init__(f"partition {partition} is damaged ({listed}{more}); run `kgc audit` for details")


@dataclass(frozen=True, slots=True)
class CompactionStats:
    records_before: int = 0
    records_after: int = 0
    batches_before: int = 0
    batches_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    segments_written: int = 0


def compact_partition(batches: Sequence[ScannedBatch], next_offset: int, out_dir: Path, now_ms: int,
                      delete_retention_ms: int, segment_bytes: int,
                      io: SegmentIO | None = None) -> CompactionStats:
    io = io or SegmentIO()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(out_dir):
        # A retried task finds its own earlier output.
        if name.endswith(LOG_SUFFIX):
            io.unlink(out_dir / name)
    latest = latest_offsets(scanned.batch for scanned in batches)
    segments: list[tuple[int, list[bytes | memoryview]]] = []
    size = records_after = batches_after = bytes_after = 0
    for scanned in batches:
        kept = compact_batch(scanned.batch, latest, now_ms, delete_retention_ms)
        if kept is None:
            continue
        data = scanned.raw if kept is scanned.batch else encode_stored_batch(kept)
        if not segments or (size and size + len(data) > segment_bytes):
            segments.append((kept.base_offset, []))
            size = 0
        segments[-1][1].append(data)
        size += len(data)
        records_after += len(kept.records)
        batches_after += 1
        bytes_after += len(data)
    for base_offset, parts in segments:
        io.write_file(out_dir / segment_name(base_offset), b"".join(parts))
    io.write_file(out_dir / segment_name(next_offset), b"")
    io.fsync_dir(out_dir)
    return CompactionStats(
        records_before=sum(len(s.batch.records) for s in batches), records_after=records_after,
        batches_before=len(batches), batches_after=batches_after,
        bytes_before=sum(len(s.raw) for s in batches), bytes_after=bytes_after,
        segments_written=len(segments) + 1)
