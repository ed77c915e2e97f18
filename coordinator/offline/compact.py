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
from dataclasses import replace
from pathlib import Path

from coordinator.offline.findings import Finding
from coordinator.offline.scan import ScannedBatch
from storage.compaction import CompactionStats, compact_batch, latest_offsets
from storage.format import encode_stored_batch
from storage.segment import LOG_SUFFIX, SegmentIO, segment_name


class CompactionRefused(Exception):
    def __init__(self, partition: int, problems: Sequence[Finding]):
        listed = "; ".join(f"{p.type.value} in {p.segment} at byte {p.position}" for p in problems[:5])
        more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
        super().__init__(f"partition {partition} is damaged ({listed}{more}); run `kgc audit` for details")


def compact_partition(batches: Sequence[ScannedBatch], next_offset: int, out_dir: Path, now_ms: int,
                      delete_retention_ms: int, segment_bytes: int,
                      io: SegmentIO | None = None) -> CompactionStats:
    latest = latest_offsets(scanned.batch for scanned in batches)
    kept: list[tuple[int, bytes | memoryview, int]] = []
    for scanned in batches:
        batch = compact_batch(scanned.batch, latest, now_ms, delete_retention_ms)
        if batch is not None:
            data = scanned.raw if batch is scanned.batch else encode_stored_batch(batch)
            kept.append((batch.base_offset, data, len(batch.records)))
    before = CompactionStats(records_before=sum(len(s.batch.records) for s in batches),
                             batches_before=len(batches), bytes_before=sum(len(s.raw) for s in batches))
    return write_compacted(kept, before, next_offset, out_dir, segment_bytes, io)


def write_compacted(kept: Sequence[tuple[int, bytes | memoryview, int]], before: CompactionStats,
                    next_offset: int, out_dir: Path, segment_bytes: int,
                    io: SegmentIO | None = None) -> CompactionStats:
    """Write the kept batches ((base offset, bytes, records) each) as segments rolled at
    `segment_bytes`, then the empty active segment."""
    io = io or SegmentIO()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(out_dir):
        # A retried task finds its own earlier output.
        if name.endswith(LOG_SUFFIX):
            io.unlink(out_dir / name)
    segments: list[tuple[int, list[bytes | memoryview]]] = []
    size = 0
    for base_offset, data, _records in kept:
        if not segments or (size and size + len(data) > segment_bytes):
            segments.append((base_offset, []))
            size = 0
        segments[-1][1].append(data)
        size += len(data)
    for base_offset, parts in segments:
        io.write_file(out_dir / segment_name(base_offset), b"".join(parts))
    io.write_file(out_dir / segment_name(next_offset), b"")
    io.fsync_dir(out_dir)
    return replace(before, records_after=sum(n for _b, _d, n in kept), batches_after=len(kept),
                   bytes_after=sum(len(d) for _b, d, _n in kept), segments_written=len(segments) + 1)
