"""The narrow log interface the coordinator writes through.

The store knows keys and values only as bytes (`value is None` is a tombstone); it knows
nothing about groups. Two implementations pass one contract suite: `MemoryLogStore`
(tests, dev) and `FileLogStore` (the durable 50-partition log).

Write path: `append(p, records, timestamp_ms)` assigns offsets at once, in call order,
and returns an `Append` whose `durable` future resolves (in offset order) once the
batch is durable under the store's fsync policy, or fails with `StorageError`. All of
one call's records form one batch, kept or lost whole by recovery.

After a failed append the partition is failed: later appends fail too, until the owner
calls `recover(p)`, which brings the partition back to its last durable state (nothing
half-written) and returns its end offset; the owner then reloads by `read(p, 0)`.

A batch too large to make ready in one step (an OffsetCommit of 100,000 partitions) is
appended in two: `await prepare(p, records, timestamp_ms)` does what `append` does
before it writes (encoding), `SLICE_RECORDS` at a time with the loop let run between
slices, and changes nothing; `append_prepared(prepared)` then appends it as one batch,
as `append` would have. The owner appends nothing else to the partition in between
(`append_prepared` refuses a batch prepared at another end offset).

`read` yields the batches that are durable (their `durable` future has resolved); an
append with no records is a barrier whose `durable` resolves once everything before it
is. `read_durable(p, from_offset, max_bytes)` gives the durable batches as stored bytes,
for serving the log as the `__consumer_offsets` topic. `partition_error(p)` is the error a partition is failed with (a `CorruptLogError`
found at open, or the `StorageError` of a failed write), None while it is healthy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from storage.eager_future import EagerFuture


class LogRecord(NamedTuple):
    # A tuple: every committed partition makes one, and a frozen dataclass costs more.
    key: bytes
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# (offset, key, value) of one record: what a load reads (`LogStore.read_fields`).
RecordFields = tuple[int, bytes | None, bytes | None]


class TxnBatch(NamedTuple):
    """A batch written in a transaction, in Kafka's shape: its records carry the producer
    id and epoch of the client whose transaction they belong to (`control` None), or it is
    that transaction's end marker (`control` COMMIT or ABORT, no records of the caller's;
    the store writes Kafka's EndTransactionMarker record)."""
    producer_id: int
    producer_epoch: int
    control: int | None = None


CONTROL_ABORT = 0       # Kafka's ControlRecordType
CONTROL_COMMIT = 1


class StoredRecord(NamedTuple):
    """A tuple, not a frozen dataclass: loading builds one per record, and a tuple is
    several times cheaper to build."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    records: tuple[StoredRecord, ...] = field(default_factory=tuple)
    # The RecordBatch header fields a reader of a real Kafka log needs: the loader skips
    # control batches, compaction keeps transactional ones, the audit reports producers.
    max_timestamp_ms: int = -1
    attributes: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)


# Records `prepare` makes ready in one step before it lets the loop run others.
SLICE_RECORDS = 2_000


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch `prepare` made ready, for `append_prepared`."""
    partition: int
    base_offset: int         # the partition's end offset when it was prepared
    count: int
    timestamp_ms: int
    payload: Any             # the store's own form of the records (their encoding, say)


@dataclass(frozen=True, slots=True)
class Append:
    last_offset: int
    durable: EagerFuture     # of the last offset; `when_done` hears of it without a loop turn


class DurableRead(NamedTuple):
    """Whole durable batches as stored, and the bounds of the durable log."""

    data: bytes
    log_start_offset: int
    durable_end_offset: int   # one past the last durable offset (Kafka's high watermark)


class StorageError(Exception):
    """A write or fsync failed; the partition must be recovered before it is used again."""


class CorruptLogError(StorageError):
    """A partition's log is damaged in a way recovery must not guess about."""

    def __init__(self, path: str, position: int, reason: str):
        super().__init__(f"{path} at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class LogStore(Protocol):
    num_partitions: int

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def read(self, partition: int, from_offset: int = 0) -> Iterator[StoredBatch]: ...

    def read_fields(self, partition: int, from_offset: int = 0) -> Iterator[tuple[bool, list[RecordFields]]]:
        """`read` for a load: each batch as (is transactional, its records' fields);
        control batches (always transactional) have no fields. A loader that meets a
        transactional batch reads the partition again with `read`, which has the producer
        ids, the markers and the headers."""

    def end_offset(self, partition: int) -> int: ...

    def read_durable(self, partition: int, from_offset: int, max_bytes: int) -> DurableRead:
        """The durable batches holding offsets at or past `from_offset`, whole and byte for
        byte, as many as fit in `max_bytes` but at least one (Kafka's KIP-74 rule, so a
        reader always progresses); no data when `from_offset` is at the durable end."""

    def append(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int,
               txn: TxnBatch | None = None) -> Append: ...

    async def prepare(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int) -> PreparedBatch:
        """`append`'s work before the write, a slice at a time (see the module docstring)."""

    def append_prepared(self, prepared: PreparedBatch) -> Append:
        """`append` of a prepared batch; `StorageError` if the partition's end moved since."""

    async def recover(self, partition: int) -> int: ...

    async def acquire(self, partition: int) -> None:
        """Before a partition is loaded: a store shared by several instances makes it this
        one's (the replicated store claims and reads it); the local stores have it already."""

    async def release(self, partition: int) -> None:
        """After a partition was unloaded: what was appended is durable or failed, and the
        store forgets the partition until it is acquired again."""

    def partition_error(self, partition: int) -> StorageError | None: ...
