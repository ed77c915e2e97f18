"""MemoryLogStore: the reference `LogStore`, for tests and for running without a data dir.

Batches live in lists; nothing survives the process. By default a batch becomes durable
on the next event-loop iteration. With `manual_commit=True` nothing is durable until the
test says so with `commit(p, up_to_offset)`, and `fail(p, exc)` fails the partition as a
failed write would: Kafka's `InMemoryPartitionWriter(autoCommit=false)`, for testing a
runtime's deferred responses and FAILED handling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from storage.api import (
    SLICE_RECORDS,
    Append,
    DurableRead,
    LogRecord,
    PreparedBatch,
    RecordFields,
    StorageError,
    StoredBatch,
    StoredRecord,
    TxnBatch,
)
from storage.eager_future import EagerFuture
from storage.format import CONTROL_FLAG, TRANSACTIONAL_FLAG, control_record, encode_stored_batch


@dataclass(slots=True)
class _Pending:
    batch: StoredBatch | None        # None: a barrier
    last_offset: int
    durable: asyncio.Future[int]


@dataclass(slots=True)
class _Partition:
    durable: list[StoredBatch] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    next_offset: int = 0
    durable_next_offset: int = 0
    failure: StorageError | None = None


class MemoryLogStore:
    def __init__(self, num_partitions: int = 50, manual_commit: bool = False):
        self.num_partitions = num_partitions
        self.manual_commit = manual_commit
        self._partitions = [_Partition() for _ in range(num_partitions)]

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def partition_error(self, partition: int) -> StorageError | None:
        return self._partitions[partition].failure

    def _check(self, partition: int) -> _Partition:
        state = self._partitions[partition]
        if state.failure is not None:
            raise state.failure
        return state

    def read(self, partition: int, from_offset: int = 0) -> Iterator[StoredBatch]:
        batches = list(self._check(partition).durable)
        return (b for b in batches if b.last_offset >= from_offset)

    def read_fields(self, partition: int, from_offset: int = 0) -> Iterator[tuple[bool, list[RecordFields]]]:
        return ((b.is_transactional, [] if b.is_control else [(r.offset, r.key, r.value) for r in b.records])
                for b in self.read(partition, from_offset))

    def end_offset(self, partition: int) -> int:
        return self._check(partition).next_offset

    def read_durable(self, partition: int, from_offset: int, max_bytes: int) -> DurableRead:
        state = self._check(partition)
        parts: list[bytes] = []
        size = 0
        for batch in state.durable:
            if batch.last_offset < from_offset:
                continue
            data = encode_stored_batch(batch)
            if parts and size + len(data) > max_bytes:
                break
            parts.append(data)
            size += len(data)
        return DurableRead(b"".join(parts), 0, state.durable_next_offset)

    def append(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int,
               txn: TxnBatch | None = None) -> Append:
        base_offset = self._partitions[partition].next_offset
        if txn is not None and txn.control is not None:
            records = (control_record(txn.control),)
        return self._append(partition, base_offset, len(records), timestamp_ms,
                            _stored(records, base_offset, timestamp_ms), txn)

    async def prepare(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int) -> PreparedBatch:
        base_offset = self._partitions[partition].next_offset
        stored: list[StoredRecord] = []
        for start in range(0, len(records), SLICE_RECORDS):
            if start:
                await asyncio.sleep(0)
            stored += _stored(records[start:start + SLICE_RECORDS], base_offset + start, timestamp_ms)
        return PreparedBatch(partition, base_offset, len(records), timestamp_ms, tuple(stored))

    def append_prepared(self, prepared: PreparedBatch) -> Append:
        state = self._partitions[prepared.partition]
        if state.next_offset != prepared.base_offset:
            raise StorageError(f"partition {prepared.partition}: a batch prepared at offset "
                               f"{prepared.base_offset} appended at {state.next_offset}")
        return self._append(prepared.partition, prepared.base_offset, prepared.count, prepared.timestamp_ms, prepared.payload)

    def _append(self, partition: int, base_offset: int, count: int, timestamp_ms: int,
                stored: tuple[StoredRecord, ...], txn: TxnBatch | None = None) -> Append:
        state = self._partitions[partition]
        durable = EagerFuture(asyncio.get_running_loop())
        last_offset = base_offset + count - 1
        if state.failure is not None:
            durable.set_exception(state.failure)
            return Append(last_offset, durable)
        batch = None
        if count:
            batch = StoredBatch(base_offset, last_offset, stored, max_timestamp_ms=timestamp_ms)
            if txn is not None:
                attributes = TRANSACTIONAL_FLAG | (CONTROL_FLAG if txn.control is not None else 0)
                batch = StoredBatch(base_offset, last_offset, stored, max_timestamp_ms=timestamp_ms,
                                    attributes=attributes, producer_id=txn.producer_id,
                                    producer_epoch=txn.producer_epoch)
        state.next_offset = last_offset + 1
        state.pending.append(_Pending(batch, last_offset, durable))
        if not self.manual_commit:
            asyncio.get_running_loop().call_soon(self.commit, partition, last_offset)
        return Append(last_offset, durable)

    def skip(self, partition: int, count: int = 1) -> None:
        """Leave `count` offsets out of the log (a replicated log's transaction marker takes
        one): the next append starts past them, and they become durable with what precedes."""
        state = self._partitions[partition]
        state.next_offset += count
        # Nobody waits on a skip: its failure is the appends' to tell, not an unread exception's.
        unawaited = EagerFuture(asyncio.get_running_loop())
        unawaited.add_done_callback(lambda f: f.cancelled() or f.exception())
        state.pending.append(_Pending(None, state.next_offset - 1, unawaited))

    def restore(self, partition: int, batches: Sequence[StoredBatch], end_offset: int) -> None:
        """The partition as read from elsewhere (a replicated log), all durable: replaces what it held."""
        self._partitions[partition] = _Partition(list(batches), [], end_offset, end_offset)

    def commit(self, partition: int, up_to_offset: int) -> None:
        """Make every pending batch ending at or before `up_to_offset` durable, in order."""
        state = self._partitions[partition]
        while state.pending and state.pending[0].last_offset <= up_to_offset:
            pending = state.pending.pop(0)
            if pending.batch is not None:
                state.durable.append(pending.batch)
            state.durable_next_offset = pending.last_offset + 1
            if not pending.durable.done():
                pending.durable.set_result(pending.last_offset)

    def fail(self, partition: int, exc: BaseException) -> None:
        """Fail the partition as a failed write does: pending and later appends fail."""
        state = self._partitions[partition]
        state.failure = StorageError(f"partition {partition}: write failed: {exc}")
        state.failure.__cause__ = exc
        for pending in state.pending:
            if not pending.durable.done():
                pending.durable.set_exception(state.failure)
        state.pending.clear()

    async def acquire(self, partition: int) -> None:
        pass        # one instance's own log: always its

    async def release(self, partition: int) -> None:
        pass

    async def recover(self, partition: int) -> int:
        state = self._partitions[partition]
        state.failure = None
        state.next_offset = state.durable_next_offset
        return state.next_offset


def _stored(records: Sequence[LogRecord], base_offset: int, timestamp_ms: int) -> tuple[StoredRecord, ...]:
    return tuple(StoredRecord(base_offset + i, timestamp_ms, r.key, r.value, r.headers)
                 for i, r in enumerate(records))
