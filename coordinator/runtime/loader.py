"""Loading a partition: replay its log from offset 0 into a fresh shard.

This is the same `shard.replay` that live writes use, so a loaded partition is exactly
what its durable records say. Rules (Kafka's `CoordinatorLoaderImpl`):
- a record whose key type this coordinator does not know is skipped with a warning
  (KIP-848, share and streams records from an imported log);
- control batches (transaction markers) carry no coordinator record and are skipped;
- a record that cannot be decoded, or that replay rejects, stops the load: the partition
  must not come up with part of its state missing.

Decoding runs on the event loop in chunks, yielding between them, so 50 partitions load
side by side without one holding the loop for long.

`RecordSerde` turns coordinator records into log records and back; `KafkaRecordSerde`
is the `__consumer_offsets` format of `coordinator.records`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from coordinator import records
from coordinator.group.result import CoordinatorRecord
from storage.api import LogRecord, LogStore, StoredRecord

log = logging.getLogger(__name__)

LOAD_CHUNK_RECORDS = 2_000
_UNSEEN = object()


class RecordSerde(Protocol):
    """A serde may also offer `for_load()`: a `deserialize` for one partition's load,
    free to remember what it decoded until the load ends."""

    def serialize(self, record: CoordinatorRecord) -> LogRecord: ...

    def deserialize(self, stored: StoredRecord) -> CoordinatorRecord | None:
        """None for a key type this coordinator does not know; raises if undecodable."""


class KafkaRecordSerde:
    def serialize(self, record: CoordinatorRecord) -> LogRecord:
        value = None if record.value is None else records.serialize_value(record.value)
        return LogRecord(records.serialize_key(record.key), value, record.headers)

    def deserialize(self, stored: StoredRecord) -> CoordinatorRecord | None:
        decoded = records.deserialize(stored.key, stored.value)
        if decoded is None:
            return None
        key, value = decoded
        return CoordinatorRecord(key, value, stored.headers)

    def for_load(self) -> Callable[[StoredRecord], CoordinatorRecord | None]:
        # A log repeats each key (every commit of a partition, until compaction), and a
        # decoded key is immutable: decode each distinct key once per load.
        keys: dict[bytes, Any] = {}
        deserialize_key, deserialize_value = records.deserialize_key, records.deserialize_value

        def deserialize(stored: StoredRecord) -> CoordinatorRecord | None:
            key_bytes = stored.key
            key = keys.get(key_bytes, _UNSEEN)
            if key is _UNSEEN:
                key = keys[key_bytes] = deserialize_key(key_bytes)
            if key is None:
                return None
            value = stored.value
            return CoordinatorRecord(key, None if value is None else deserialize_value(key, value), stored.headers)

        return deserialize


class LoadError(Exception):
    def __init__(self, partition: int, offset: int, reason: str):
        super().__init__(f"partition {partition} offset {offset}: {reason}")
        self.partition = partition
        self.offset = offset


@dataclass(frozen=True, slots=True)
class LoadSummary:
    records: int
    skipped: int
    end_offset: int


async def load_partition(store: LogStore, partition: int, shard: Any, serde: RecordSerde,
                         chunk_records: int = LOAD_CHUNK_RECORDS) -> LoadSummary:
    error = store.partition_error(partition)
    if error is not None:
        raise error
    loaded = skipped = since_yield = 0
    warned_key_types: set[bytes] = set()
    for_load = getattr(serde, "for_load", None)
    deserialize = serde.deserialize if for_load is None else for_load()
    replay = shard.replay
    for batch in store.read(partition, 0):
        if batch.is_control:
            continue
        for stored in batch.records:
            try:
                record = deserialize(stored)
            except Exception as exc:
                raise LoadError(partition, stored.offset, f"undecodable record: {exc!r}") from exc
            if record is None:
                skipped += 1
                key_type = stored.key[:2]
                if key_type not in warned_key_types:
                    warned_key_types.add(key_type)
                    log.warning("partition %d offset %d: skipping records of unknown key type %s",
                                partition, stored.offset, key_type.hex())
                continue
            try:
                replay(stored.offset, record)
            except Exception as exc:
                raise LoadError(partition, stored.offset, f"replay failed: {exc!r}") from exc
            loaded += 1
        since_yield += len(batch.records)
        if since_yield >= chunk_records:
            since_yield = 0
            await asyncio.sleep(0)
    return LoadSummary(loaded, skipped, store.end_offset(partition))
