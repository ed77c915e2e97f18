"""Loading a partition: replay its log from offset 0 into a fresh shard.

This is the same `shard.replay` that live writes use, so a loaded partition is exactly
what its durable records say. Rules (Kafka's `CoordinatorLoaderImpl`):
- a record whose key type this coordinator does not know is skipped with a warning
  (KIP-848, share and streams records from an imported log);
- control batches (transaction markers) carry no coordinator record and are skipped;
- a record that cannot be decoded, or that replay rejects, stops the load: the partition
  must not come up with part of its state missing.

A compacted log (`RecordSerde.compacted`, as `__consumer_offsets` is) loads the way
Kafka's old `GroupMetadataManager` loaded it: a lean walk (`storage.format.record_fields`)
keeps the latest record per key, and only those are decoded and replayed, in offset
order. Replay must already give the same state from a compacted log, which Kafka's
cleaner and ours produce, with one addition here: a key whose latest record is a
tombstone also replays the last value it deleted, before it. An offset commit creates
its group when the group is absent (a "simple" group, kept when its offsets are
deleted), so that value may be the one that makes the group exist; replaying it keeps
the load exact where a compacted log would lose the group. A superseded value is never
decoded: like a compacted log, the load does not see it, corrupt or not (the CRC still
covers it, and the offline audit decodes every record).

Loading runs on the event loop in chunks, yielding between them, so 50 partitions load
side by side without one holding the loop for long.

`RecordSerde` turns coordinator records into log records and back; `KafkaRecordSerde`
is the `__consumer_offsets` format of `coordinator.records`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol

from coordinator import records
from coordinator.common.result import MARKER_ABORT, MARKER_COMMIT
from coordinator.records import CoordinatorRecord
from coordinator.runtime.api import Shard
from storage.api import LogRecord, LogStore, RecordFields, StoredBatch, StoredRecord
from storage.format import control_type

log = logging.getLogger(__name__)

LOAD_CHUNK_RECORDS = 2_000


class RecordSerde(Protocol):
    # True when replaying the latest record per key (and, under a tombstone, the value
    # it deleted) gives the state a replay of every record gives; the loader then reads
    # the log that way.
    compacted: bool

    def serialize_all(self, records: Sequence[CoordinatorRecord]) -> list[LogRecord]:
        """The log records of `records`, in order: what one operation's Result writes."""

    def deserialize(self, stored: StoredRecord) -> CoordinatorRecord | None:
        """None for a key type this coordinator does not know; raises if undecodable.
        On load, `stored` has no timestamp (-1) and no headers: replay reads neither."""


class KafkaRecordSerde:
    # `__consumer_offsets` is a compacted topic: see the module docstring.
    compacted = True

    def serialize_all(self, recs: Sequence[CoordinatorRecord]) -> list[LogRecord]:
        return records.serialize_records(recs, LogRecord)

    def deserialize(self, stored: StoredRecord) -> CoordinatorRecord | None:
        return records.deserialize_record(stored.key, stored.value, stored.headers)


class LoadError(Exception):
    def __init__(self, partition: int, offset: int, reason: str):
        super().__init__(f"partition {partition} offset {offset}: {reason}")
        self.partition = partition
        self.offset = offset


@dataclass(frozen=True, slots=True)
class LoadSummary:
    records: int          # records read, control batches aside
    skipped: int          # replayed records of unknown key types, skipped
    end_offset: int


async def load_partition(store: LogStore, partition: int, shard: Shard, serde: RecordSerde,
                         chunk_records: int = LOAD_CHUNK_RECORDS) -> LoadSummary:
    error = store.partition_error(partition)
    if error is not None:
        raise error
    batches = store.read_fields(partition, 0)
    try:
        if serde.compacted:
            read, survivors = await _latest_by_key(batches, chunk_records)
            _replayed, skipped = await _replay(partition, survivors, shard, serde, chunk_records)
        else:
            every_record = (fields for transactional, batch in _plain(batches) for fields in batch)
            read, skipped = await _replay(partition, every_record, shard, serde, chunk_records)
    except _Transactional:
        # Read before anything was replayed (see `_plain`): the log is read again, whole
        # and in order, with the producer ids and markers the fast read leaves out.
        read, skipped = await _replay_transactions(partition, store.read(partition, 0), shard, serde,
                                                   chunk_records)
    return LoadSummary(read, skipped, store.end_offset(partition))


class _Transactional(Exception):
    """The log holds a transactional batch: latest-by-key cannot load it."""


def _plain(batches: Iterator[tuple[bool, list[RecordFields]]]) -> Iterator[tuple[bool, list[RecordFields]]]:
    """`batches`, raising `_Transactional` at the first transactional one."""
    for transactional, batch in batches:
        if transactional:
            raise _Transactional
        yield transactional, batch


async def _replay_transactions(partition: int, batches: Iterable[StoredBatch], shard: Shard, serde: RecordSerde,
                               chunk_records: int) -> tuple[int, int]:
    """Every record in log order, as Kafka's loader does: records of a transactional batch
    are pending offsets of its producer, a control batch ends its producer's transaction,
    and a commit keeps each offset only if no later plain commit replaced it (the shard)."""
    read = skipped = since_yield = 0
    for batch in batches:
        if batch.is_control:
            marker = control_type(batch.records[0].key) if batch.records else None
            if marker in (MARKER_COMMIT, MARKER_ABORT):
                shard.replay_end_transaction(batch.producer_id, marker)
            continue
        for stored in batch.records:
            try:
                record = serde.deserialize(stored)
            except Exception as exc:
                raise LoadError(partition, stored.offset, f"undecodable record: {exc!r}") from exc
            read += 1
            if record is None:
                skipped += 1
                continue
            try:
                if batch.is_transactional:
                    shard.replay_transactional(stored.offset, batch.producer_id, record)
                else:
                    shard.replay(stored.offset, record)
            except Exception as exc:
                raise LoadError(partition, stored.offset, f"replay failed: {exc!r}") from exc
        since_yield += len(batch.records)
        if since_yield >= chunk_records:
            since_yield = 0
            await asyncio.sleep(0)
    return read, skipped


async def _latest_by_key(batches: Iterator[tuple[bool, list[RecordFields]]],
                         chunk_records: int) -> tuple[int, list[RecordFields]]:
    """The records a compacted load replays, in offset order, and how many were read."""
    latest: dict[bytes | None, tuple[int, bytes | None]] = {}
    deleted: dict[bytes | None, tuple[int, bytes | None]] = {}   # the last value under a tombstone
    read = since_yield = 0
    for _, batch in _plain(batches):
        for offset, key, value in batch:
            if value is None:
                before = latest.get(key)
                if before is not None and before[1] is not None:
                    deleted[key] = before
            latest[key] = (offset, value)
        read += len(batch)
        since_yield += len(batch)
        if since_yield >= chunk_records:
            since_yield = 0
            await asyncio.sleep(0)
    survivors = [(offset, key, value) for key, (offset, value) in latest.items()]
    survivors += [(offset, key, value) for key, (offset, value) in deleted.items() if latest[key][1] is None]
    survivors.sort(key=itemgetter(0))
    return read, survivors


async def _replay(partition: int, fields: Iterable[RecordFields], shard: Shard, serde: RecordSerde,
                  chunk_records: int) -> tuple[int, int]:
    """Decode and replay each record; how many were handled, and how many skipped."""
    deserialize = serde.deserialize
    replay = shard.replay
    handled = skipped = since_yield = 0
    warned_key_types: set[bytes] = set()
    for offset, key, value in fields:
        try:
            record = deserialize(StoredRecord(offset, -1, key, value))
        except Exception as exc:
            raise LoadError(partition, offset, f"undecodable record: {exc!r}") from exc
        handled += 1
        since_yield += 1
        if record is None:
            assert key is not None          # deserialize refuses a record without a key
            skipped += 1
            key_type = key[:2]
            if key_type not in warned_key_types:
                warned_key_types.add(key_type)
                log.warning("partition %d offset %d: skipping records of unknown key type %s",
                            partition, offset, key_type.hex())
        else:
            try:
                replay(offset, record)
            except Exception as exc:
                raise LoadError(partition, offset, f"replay failed: {exc!r}") from exc
        if since_yield >= chunk_records:
            since_yield = 0
            await asyncio.sleep(0)
    return handled, skipped
