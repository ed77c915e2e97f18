"""Which records survive compaction: pure rules over decoded batches.

The online cleaner and the offline (Spark) job both decide with these functions, so a
log compacted either way loads into the same state.

Rules (after Kafka's `LogCleaner.scala`, adapted):

1. Latest per key. A record survives only if it is the last record of its key, by
   offset, among the batches the rules were given (the cleanable section: closed
   segments; the active segment is never cleaned, so a newer record there only means
   an older one survives a little longer). Records without a key always survive.
2. Tombstones (a latest record with a null value) survive for `delete_retention_ms`
   after their own timestamp: dropped once `now_ms >= timestamp_ms +
   delete_retention_ms`. Kafka instead starts the clock when a segment is first
   cleaned and stamps that horizon into the batch (attribute bit 6); measuring from
   the record's timestamp needs no extra rewrite, and gives the same guarantee to the
   only reader of this log that matters, our loader: a tombstone and the records it
   deletes always go in the same pass, oldest segments first.
3. Transactional and control batches are kept whole and supersede nothing. We never
   write them; a log imported from Kafka may hold them, and whether a transactional
   offset counts depends on its COMMIT/ABORT marker, which these rules do not judge.
4. Batches are never split or renumbered: a batch keeps its first and last offset and
   every surviving record its own offset; a batch with no survivors is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, replace

from storage.api import StoredBatch, StoredRecord


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """What one compaction did, online (the cleaner, per segment) or offline (`kgc compact`,
    per partition): counted the same way, so the two can be compared."""
    records_before: int = 0
    records_after: int = 0
    batches_before: int = 0
    batches_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    segments_written: int = 0
    segments_removed: int = 0

    def __add__(self, other: CompactionStats) -> CompactionStats:
        return CompactionStats(*(x + y for x, y in zip(astuple(self), astuple(other), strict=True)))


def supersedes(batch: StoredBatch) -> bool:
    return not (batch.is_control or batch.is_transactional)


def latest_offsets(batches: Iterable[StoredBatch]) -> dict[bytes, int]:
    """key -> offset of its last record, over the batches whose records supersede."""
    latest: dict[bytes, int] = {}
    for batch in batches:
        if supersedes(batch):
            for record in batch.records:
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def tombstone_expired(record: StoredRecord, now_ms: int, delete_retention_ms: int) -> bool:
    return now_ms >= record.timestamp_ms + delete_retention_ms


def survives(record: StoredRecord, latest: Mapping[bytes, int], now_ms: int, delete_retention_ms: int) -> bool:
    if record.key is None:
        return True
    if latest.get(record.key, record.offset) > record.offset:
        return False
    return record.value is not None or not tombstone_expired(record, now_ms, delete_retention_ms)


def compact_batch(batch: StoredBatch, latest: Mapping[bytes, int], now_ms: int,
                  delete_retention_ms: int) -> StoredBatch | None:
    """The batch with only its surviving records: the same object if all survive, None
    if none do."""
    if not supersedes(batch):
        return batch
    kept = tuple(r for r in batch.records if survives(r, latest, now_ms, delete_retention_ms))
    if len(kept) == len(batch.records):
        return batch
    return replace(batch, records=kept) if kept else None

