"""The online cleaner: compacts a partition's closed segments in place.

One pass over a partition (`SegmentCleaner.clean`, run in a worker thread):

1. Take the closed segments wholly behind the durable mark (never the active segment,
   never bytes a failed write may still take back).
2. Decode them all and build the latest-offset map over them (`compaction`).
3. Rewrite them oldest first, so a tombstone never goes before the older records it
   deletes. A batch that keeps every record is copied byte for byte; one that loses
   some is re-encoded with its offsets kept; one that loses all is dropped.
4. Swap each changed segment: write `<segment>.cleaned`, fsync it, record both the old
   and the new state in the manifest, rename it over the segment, fsync the directory,
   record only the new state. A segment left with no batches is unlinked instead (the
   manifest accepts it absent first, then forgets it).

Crash safety: before the rename the original is intact and open removes the stray
`.cleaned`; after it the new file is complete and fsynced. Either way the log loads
into the same state. Appends only touch the active segment, and readers hold their
own file descriptors, so neither notices a swap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.api import CorruptLogError, StoredBatch
from storage.compaction import CompactionStats, compact_batch, latest_offsets
from storage.format import BatchReader, decode_batch, encode_stored_batch
from storage.manifest import SegmentState, checksum
from storage.partition_log import PartitionLog
from storage.segment import CLEANED_SUFFIX, Segment

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Loaded:
    segment: Segment
    data: bytes
    batches: list[tuple[int, int, StoredBatch]]        # (position, size, batch)


class SegmentCleaner:
    def __init__(self, partition_log: PartitionLog, delete_retention_ms: int):
        self._log = partition_log
        self._delete_retention_ms = delete_retention_ms

    def clean(self, now_ms: int) -> CompactionStats:
        segments = self._log.closed_durable_segments()
        # Two passes, one segment in memory at a time: the map first, then the rewrite.
        latest = latest_offsets(batch for segment in segments for _, _, batch in self._load(segment).batches)
        report = CompactionStats()
        for segment in segments:
            report = report + self._clean_segment(self._load(segment), latest, now_ms)
        if report.segments_written or report.segments_removed:
            log.info("cleaned %s: %s", self._log.directory.name, report)
        return report

    def _clean_segment(self, loaded: _Loaded, latest: dict[bytes, int], now_ms: int) -> CompactionStats:
        parts: list[bytes] = []
        records_after = batches_after = 0
        for position, size, batch in loaded.batches:
            kept = compact_batch(batch, latest, now_ms, self._delete_retention_ms)
            if kept is batch:
                parts.append(loaded.data[position:position + size])
            elif kept is not None:
                parts.append(encode_stored_batch(kept))
            records_after += len(kept.records) if kept is not None else 0
            batches_after += kept is not None
        output = b"".join(parts)
        changed = output != loaded.data
        if changed and parts:
            self._swap(loaded.segment, output)
        elif changed:
            self._remove(loaded.segment)
        return CompactionStats(
            records_before=sum(len(b.records) for _, _, b in loaded.batches),
            records_after=records_after,
            batches_before=len(loaded.batches),
            batches_after=batches_after,
            bytes_before=len(loaded.data),
            bytes_after=len(output),
            segments_written=int(changed and bool(parts)),
            segments_removed=int(changed and not parts))

    def _load(self, segment: Segment) -> _Loaded:
        with open(segment.path, "rb") as f:
            data = f.read(segment.size)
        reader = BatchReader(data)
        batches = [(position, header.size, decode_batch(data, position, header))
                   for position, header in reader.headers()]
        if reader.stop is not None or reader.end != segment.size:
            # Open checked this segment and only the cleaner rewrites it: it changed on disk.
            raise CorruptLogError(str(segment.path), reader.end, f"changed under the cleaner: {reader.stop}")
        return _Loaded(segment, data, batches)

    def _swap(self, segment: Segment, output: bytes) -> None:
        io = self._log.io
        cleaned = segment.path.with_name(segment.path.name + CLEANED_SUFFIX)
        if cleaned.exists():
            io.unlink(cleaned)
        io.write_file(cleaned, output)
        manifest = self._log.manifest
        old = manifest.state(segment.base_offset)
        new = SegmentState(len(output), BatchReader(output).scan().next_offset - 1, checksum(output))
        with self._log.lock:
            manifest.record(segment.base_offset, old, new)
            io.replace(cleaned, segment.path)
            segment.size = len(output)
        io.fsync_dir(self._log.directory)
        with self._log.lock:
            manifest.record(segment.base_offset, new)

    def _remove(self, segment: Segment) -> None:
        manifest = self._log.manifest
        with self._log.lock:
            manifest.record(segment.base_offset, manifest.state(segment.base_offset), None)
            self._log.segments.remove(segment)
            self._log.io.unlink(segment.path)
        self._log.io.fsync_dir(self._log.directory)
        with self._log.lock:
            manifest.forget(segment.base_offset)
