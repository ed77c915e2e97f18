"""Loading a partition through the real `__consumer_offsets` serde, from the memory store
and from segment files on disk."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from coordinator.group.errors import CorruptStateError
from coordinator.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    new_group_metadata_record,
    new_offset_commit_record,
    new_offset_commit_tombstone,
)
from coordinator.runtime.loader import KafkaRecordSerde, LoadError, load_partition
from storage.api import LogRecord, StorageError, StoredBatch, StoredRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import CONTROL_FLAG, TRANSACTIONAL_FLAG, encode_stored_batch
from storage.memory_store import MemoryLogStore
from tests.support.log_records import log_record

SERDE = KafkaRecordSerde()

COMMIT = new_offset_commit_record("g", "orders", 0, OffsetCommitValue(42, -1, "meta", 1_000),
                                  member_id="m-1", generation=3, client_id="c", client_host="/10.0.0.5")
GROUP = new_group_metadata_record("g", GroupMetadataValue(
    "consumer", 3, "range", "m-1", 1_000,
    (MemberMetadata("m-1", None, "c", "/10.0.0.5", 30_000, 10_000, b"sub", b"assign"),)))
TOMBSTONE = new_offset_commit_tombstone("g", "orders", 1)


def unknown_type_record(key_type: int) -> LogRecord:
    # A record of a type kgc does not know.
    return LogRecord(struct.pack(">hh", key_type, 1) + b"g", struct.pack(">hi", 0, 7))


class RecordingShard:
    def __init__(self, partition: int = 0, journal: list | None = None, reject_at: int | None = None):
        self.partition = partition
        self.replayed = []
        self.journal = journal if journal is not None else []
        self.reject_at = reject_at
        self.transactions = []

    def replay(self, offset, record):
        if offset == self.reject_at:
            raise CorruptStateError(f"tombstone for a group with members at {offset}")
        self.replayed.append((offset, record))
        self.journal.append((self.partition, offset))

    def replay_transactional(self, offset, producer_id, record):
        self.replayed.append((offset, record._replace(headers=())))
        self.transactions.append(("pending", producer_id, offset))

    def replay_end_transaction(self, producer_id, marker):
        self.transactions.append(("end", producer_id, marker))


async def durable(store: MemoryLogStore, partition: int, records: list[LogRecord]) -> None:
    await store.append(partition, records, 1_000).durable


@pytest.fixture
def store():
    return MemoryLogStore(num_partitions=2)


def fields(shard: RecordingShard) -> list:
    """What replay was given: the loader reads no timestamps and no audit headers."""
    assert all(record.headers == () for _, record in shard.replayed)
    return [(offset, record.key, record.value) for offset, record in shard.replayed]


def as_replayed(offset: int, record) -> tuple:
    return offset, record.key, record.value


async def test_load_replays_the_latest_record_of_each_key_in_offset_order(store):
    older = new_offset_commit_record("g", "orders", 0, OffsetCommitValue(41, -1, "", 900))
    await durable(store, 0, [log_record(older), log_record(GROUP)])
    await durable(store, 0, [log_record(TOMBSTONE), log_record(COMMIT)])
    shard = RecordingShard()
    summary = await load_partition(store, 0, shard, SERDE)
    # keys, values and tombstones come back as they went in; the superseded commit is not replayed
    assert fields(shard) == [as_replayed(1, GROUP), as_replayed(2, TOMBSTONE), as_replayed(3, COMMIT)]
    assert (summary.records, summary.skipped, summary.end_offset) == (4, 0, 4)


async def test_a_tombstone_replays_after_the_value_it_deleted(store):
    # the commit may be what made its group exist: replay keeps it, then deletes it
    deleted = new_offset_commit_tombstone("g", "orders", 0)
    await durable(store, 0, [log_record(GROUP), log_record(COMMIT), log_record(COMMIT)])
    await durable(store, 0, [log_record(deleted), log_record(TOMBSTONE)])
    shard = RecordingShard()
    await load_partition(store, 0, shard, SERDE)
    assert fields(shard) == [as_replayed(0, GROUP), as_replayed(2, COMMIT), as_replayed(3, deleted),
                             as_replayed(4, TOMBSTONE)]


async def test_unknown_record_types_are_skipped_with_one_warning(store, caplog):
    await durable(store, 0, [unknown_type_record(9), log_record(COMMIT), unknown_type_record(9)])
    shard = RecordingShard()
    with caplog.at_level(logging.WARNING, logger="coordinator.runtime.loader"):
        summary = await load_partition(store, 0, shard, SERDE)
    assert fields(shard) == [as_replayed(1, COMMIT)]
    # every record read counts; the unknown key is skipped once, as its latest record
    assert (summary.records, summary.skipped) == (3, 1)
    warnings = [r for r in caplog.records if "unknown key type 0009" in r.getMessage()]
    assert len(warnings) == 1


async def test_an_undecodable_record_stops_the_load_at_its_offset(store):
    truncated = log_record(COMMIT).key[:-3]
    await durable(store, 0, [log_record(COMMIT), LogRecord(truncated, b"\x00\x03"), log_record(GROUP)])
    shard = RecordingShard()
    with pytest.raises(LoadError) as err:
        await load_partition(store, 0, shard, SERDE)
    assert err.value.offset == 1
    assert fields(shard) == [as_replayed(0, COMMIT)]


async def load_segment(data_dir, segment: bytes, shard: RecordingShard):
    """`segment` as partition 0's first segment file, loaded into `shard` through the file store."""
    directory = partition_dir(data_dir, 0)
    directory.mkdir(parents=True)
    (directory / f"{0:020d}.log").write_bytes(segment)
    store = FileLogStore(data_dir, num_partitions=1, fsync="never")
    await store.open()
    try:
        return await load_partition(store, 0, shard, SERDE)
    finally:
        await store.close()


async def test_a_record_without_a_key_stops_the_load_at_its_offset_and_says_so(tmp_path):
    # Kafka keys every record of __consumer_offsets: a keyless one is damage, never skipped.
    # The log's format allows it (a key of length -1), so it is written on disk as such.
    first, after = log_record(COMMIT), log_record(GROUP)
    records = (StoredRecord(0, 1_000, first.key, first.value), StoredRecord(1, 1_000, None, b"\x00\x03"),
               StoredRecord(2, 1_000, after.key, after.value, after.headers))
    shard = RecordingShard()
    with pytest.raises(LoadError, match="record without a key") as err:
        await load_segment(tmp_path, encode_stored_batch(StoredBatch(0, 0, records)), shard)
    assert err.value.offset == 1
    assert fields(shard) == [as_replayed(0, COMMIT)]


async def test_a_record_that_replay_rejects_stops_the_load(store):
    await durable(store, 0, [log_record(COMMIT), log_record(GROUP)])
    with pytest.raises(LoadError) as err:
        await load_partition(store, 0, RecordingShard(reject_at=1), SERDE)
    assert err.value.offset == 1
    assert isinstance(err.value.__cause__, CorruptStateError)


async def test_a_failed_partition_is_not_loaded(store):
    store.fail(0, OSError("disk full"))
    with pytest.raises(StorageError):
        await load_partition(store, 0, RecordingShard(), SERDE)


async def test_partitions_load_side_by_side(store):
    for partition in (0, 1):
        for p in range(3):
            await durable(store, partition, [log_record(
                new_offset_commit_record("g", "orders", p, OffsetCommitValue(p, -1, "", 1_000)))])
    journal: list[tuple[int, int]] = []
    await asyncio.gather(*(load_partition(store, p, RecordingShard(p, journal), SERDE, chunk_records=1)
                           for p in (0, 1)))
    # each load yields after every chunk, so neither holds the loop until it is done
    assert journal == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]


async def test_a_transaction_in_a_segment_file_is_replayed_pending_then_ended_by_its_marker(tmp_path):
    # given a segment as a real cluster writes it: a transactional commit and its marker
    stored = [StoredRecord(0, 1_000, r.key, r.value, r.headers) for r in [log_record(COMMIT)]]
    marker = StoredRecord(1, 1_000, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))
    after = log_record(GROUP)
    segment = b"".join([
        encode_stored_batch(StoredBatch(0, 0, tuple(stored), attributes=TRANSACTIONAL_FLAG,
                                        producer_id=9, producer_epoch=0, base_sequence=0)),
        encode_stored_batch(StoredBatch(1, 1, (marker,), attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG,
                                        producer_id=9, producer_epoch=0)),
        encode_stored_batch(StoredBatch(2, 2, (StoredRecord(2, 1_000, after.key, after.value, after.headers),))),
    ])
    shard = RecordingShard()
    summary = await load_segment(tmp_path, segment, shard)
    # then the marker is not decoded as a coordinator record: it ends producer 9's transaction (COMMIT)
    assert [(o, r.key, r.value) for o, r in shard.replayed] == [as_replayed(0, COMMIT), as_replayed(2, GROUP)]
    assert shard.transactions == [("pending", 9, 0), ("end", 9, 1)]
    assert summary.end_offset == 3
