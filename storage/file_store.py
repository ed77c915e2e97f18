"""FileLogStore: the durable log, one directory of segments per partition.

    <data_dir>/__consumer_offsets-<p>/<20-digit base offset>.log      p in 0..num_partitions-1

Each partition is a `PartitionLog` (segments, recovery, roll) fed by a
`GroupCommitWriter` (batching, fsync policy) and compacted by a `SegmentCleaner`.
Partitions are independent: one that is damaged (`CorruptLogError` at open) or whose
write failed refuses reads and appends with its error, and the others keep serving.
`clean` and `recover` of one partition never run at the same time.

A store holds the partitions it was given (`partitions`, all of them by default), locked
in the data dir for as long as it is open (`storage.dir_lock`): a second process asking
for one of them refuses to open (`storage.dir_lock.DataDirInUse`) instead of appending to the same
segments, and an operation on a partition the store does not hold raises
`PartitionNotHeld`.

Under `fsync always` each active segment is preallocated `preallocate_bytes` ahead of
its log (`PartitionLog`), so a commit's sync is an `fdatasync` of data only; under the
other policies nothing syncs per write and segments grow as they are written.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from storage.api import (
    SLICE_RECORDS,
    Append,
    DurableRead,
    LogRecord,
    PreparedBatch,
    RecordFields,
    StorageError,
    StoredBatch,
    TxnBatch,
)
from storage.cleaner import SegmentCleaner
from storage.clock import wall_clock_ms
from storage.compaction import CompactionStats
from storage.dir_lock import PartitionLocks, lock_partitions
from storage.format import encode_batch, encode_records, frame_records
from storage.fsync_policy import FsyncMode, FsyncPolicy
from storage.group_commit import CommitObserver, DiskActivity, GroupCommitWriter
from storage.partition_log import PartitionLog
from storage.segment import SegmentIO

log = logging.getLogger(__name__)

TOPIC = "__consumer_offsets"
# A chunk of zeros per extension: one fsync of it per this many bytes of log.
PREALLOCATE_BYTES = 2**20


class NoPartitionOpens(StorageError):
    """Not one partition of the data dir opens (its files or its lock file cannot be
    written, say): the store can hold no group at all."""


class CannotOpen(StorageError):
    """A partition's files cannot be opened (permissions, a file where a directory belongs)."""


class PartitionNotHeld(StorageError):
    """The store was made for other partitions of the data dir: this one is another's."""


def partition_dir(data_dir: Path, partition: int) -> Path:
    return Path(data_dir) / f"{TOPIC}-{partition}"


def partition_dirs(data_dir: str | Path) -> dict[int, Path]:
    """Partition number -> directory, for every `__consumer_offsets-<p>` in the data dir."""
    found = {}
    for name in os.listdir(data_dir):
        prefix, dash, number = name.rpartition("-")
        if prefix == TOPIC and dash and number.isdigit() and (Path(data_dir) / name).is_dir():
            found[int(number)] = Path(data_dir) / name
    return dict(sorted(found.items()))


class FileLogStore:
    def __init__(self, data_dir: str | Path, num_partitions: int = 50, fsync: str = "always",
                 segment_bytes: int = 100 * 2**20, delete_retention_ms: int = 86_400_000,
                 clock: Callable[[], int] = wall_clock_ms, io: SegmentIO | None = None,
                 commit_observer: CommitObserver | None = None, preallocate_bytes: int = PREALLOCATE_BYTES,
                 partitions: Iterable[int] | None = None):
        """`partitions`: the ones this store opens, locks and writes (None: all
        `num_partitions`); the others refuse every operation with `PartitionNotHeld`."""
        if segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, not {segment_bytes}")
        self.data_dir = Path(data_dir)
        self.num_partitions = num_partitions
        self.partitions = frozenset(range(num_partitions) if partitions is None else partitions)
        outside = sorted(p for p in self.partitions if not 0 <= p < num_partitions)
        if outside:
            raise ValueError(f"partitions {outside} are not among the {num_partitions} partitions")
        self.policy = FsyncPolicy.parse(fsync)
        self.segment_bytes = segment_bytes
        self.delete_retention_ms = delete_retention_ms
        self._clock = clock
        self._io = io or SegmentIO()
        self._commit_observer = commit_observer
        preallocate = preallocate_bytes if self.policy.mode is FsyncMode.ALWAYS else 0
        self._logs = [PartitionLog(partition_dir(self.data_dir, p), segment_bytes, self._io, preallocate)
                      for p in range(num_partitions)]
        self._writers: list[GroupCommitWriter | None] = [None] * num_partitions
        self._disk = DiskActivity()
        # A partition not held is refused as one that failed to open is, for good: every
        # read and append checks this list already.
        self._open_errors: list[StorageError | None] = [
            None if p in self.partitions else PartitionNotHeld(f"partition {p} is not held by this store")
            for p in range(num_partitions)]
        self._exclusive: list[asyncio.Lock] = []
        self._locks: PartitionLocks | None = None

    async def open(self) -> None:
        """Locks its partitions in the data dir (`DataDirInUse` if another process holds
        any: then it holds none) and opens them; one that is refused is logged and refuses
        its requests, unless none can be opened at all: then `NoPartitionOpens` (one cause,
        said once)."""
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._locks = lock_partitions(self.data_dir, self.partitions)
        except OSError as exc:
            # The lock file cannot be written (a read-only data dir): nothing may be opened.
            raise NoPartitionOpens(f"none of its {len(self.partitions)} partitions can be locked "
                                   f"({exc})") from exc
        try:
            await self._open_held()
        except BaseException:
            await self.close()
            raise

    async def _open_held(self) -> None:
        self._exclusive = [asyncio.Lock() for _ in range(self.num_partitions)]
        held = sorted(self.partitions)
        for p in held:
            await self._open_partition(p, report=False)
            self._writers[p] = GroupCommitWriter(p, self._logs[p], self.policy, self._commit_observer,
                                                self._disk)
        refused = [(p, error) for p in held if (error := self._open_errors[p]) is not None]
        # Only files kgc cannot open at all make the store useless; damage stays per
        # partition, for `kgc inspect` and `kgc repair` to name and mend.
        if held and len(refused) == len(held) and all(isinstance(e, CannotOpen) for _, e in refused):
            raise NoPartitionOpens(f"none of its {len(held)} partitions can be opened "
                                   f"(partition {refused[0][0]}: {refused[0][1]})")
        for p, error in refused:
            log.error("partition %d refused: %s", p, error)

    async def _open_partition(self, partition: int, *, report: bool = True) -> None:
        try:
            await asyncio.to_thread(self._logs[partition].open)
        except StorageError as e:
            self._open_errors[partition] = e
        except OSError as exc:
            self._open_errors[partition] = CannotOpen(f"cannot open: {exc}")
        else:
            self._open_errors[partition] = None
            return
        if report:
            log.error("partition %d refused: %s", partition, self._open_errors[partition])

    async def close(self) -> None:
        """Flushes and closes every partition, then lets the data dir's locks go."""
        for p in sorted(self.partitions):
            writer = self._writers[p]
            if writer is not None:
                await writer.close()
                self._writers[p] = None
            self._logs[p].close()
        if self._locks is not None:
            self._locks.release()
            self._locks = None

    def _held(self, partition: int) -> None:
        if partition not in self.partitions:
            raise PartitionNotHeld(f"partition {partition} is not held by this store")

    def partition_error(self, partition: int) -> StorageError | None:
        writer = self._writers[partition]
        return self._open_errors[partition] or (writer.failure if writer is not None else None)

    def _check(self, partition: int) -> None:
        error = self.partition_error(partition)
        if error is not None:
            raise error

    def read(self, partition: int, from_offset: int = 0) -> Iterator[StoredBatch]:
        self._check(partition)
        return self._logs[partition].read(from_offset)

    def read_fields(self, partition: int, from_offset: int = 0) -> Iterator[tuple[bool, list[RecordFields]]]:
        """`read` for a load: each batch as (is transactional, its records' `(offset,
        key, value)`), without timestamps, headers or a `StoredRecord` per record."""
        self._check(partition)
        return self._logs[partition].read_fields(from_offset)

    def end_offset(self, partition: int) -> int:
        self._check(partition)
        return self._logs[partition].next_offset

    def read_durable(self, partition: int, from_offset: int, max_bytes: int) -> DurableRead:
        self._check(partition)
        return self._logs[partition].read_durable(from_offset, max_bytes)

    def append(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int,
               txn: TxnBatch | None = None) -> Append:
        count = 1 if txn is not None and txn.control is not None else len(records)
        return self._submit(partition, count,
                            lambda base_offset: encode_batch(base_offset, records, timestamp_ms, txn))

    async def prepare(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int) -> PreparedBatch:
        self._held(partition)
        base_offset = self._logs[partition].next_offset
        parts = []
        for start in range(0, len(records), SLICE_RECORDS):
            if start:
                await asyncio.sleep(0)
            parts.append(encode_records(records[start:start + SLICE_RECORDS], start))
        return PreparedBatch(partition, base_offset, len(records), timestamp_ms, b"".join(parts))

    def append_prepared(self, prepared: PreparedBatch) -> Append:
        partition = prepared.partition
        self._held(partition)
        if self._logs[partition].next_offset != prepared.base_offset:
            raise StorageError(f"partition {partition}: a batch prepared at offset {prepared.base_offset} "
                               f"appended at {self._logs[partition].next_offset}")
        return self._submit(partition, prepared.count, lambda base_offset: frame_records(
            base_offset, prepared.count, prepared.timestamp_ms, prepared.payload))

    def _submit(self, partition: int, count: int, encode: Callable[[int], bytes]) -> Append:
        """Write a batch of `count` records, `encode(base_offset)`, as the partition's next."""
        refused = self._open_errors[partition]
        if refused is not None:
            raise refused
        writer = self._writers[partition]
        if writer is None:
            raise StorageError(f"partition {partition}: the store is not open")
        partition_log = self._logs[partition]
        base_offset = partition_log.next_offset
        last_offset = base_offset + count - 1
        if writer.failure is not None:
            # Refused: no offsets are assigned; the future carries the failure.
            return Append(last_offset, writer.submit(base_offset, b"", last_offset, base_offset))
        data = encode(base_offset) if count else b""
        partition_log.next_offset = last_offset + 1
        return Append(last_offset, writer.submit(base_offset, data, last_offset, last_offset + 1))

    async def acquire(self, partition: int) -> None:
        self._held(partition)     # one instance's own log: its partitions are its from open on

    async def release(self, partition: int) -> None:
        pass

    async def recover(self, partition: int) -> int:
        self._held(partition)
        async with self._exclusive[partition]:
            writer = self._writers[partition]
            if self._open_errors[partition] is not None:
                await self._open_partition(partition)
                self._check(partition)
            elif writer is None:
                raise StorageError(f"partition {partition}: the store is not open")
            elif writer.failure is not None:
                try:
                    await asyncio.to_thread(self._logs[partition].truncate_to_durable)
                except OSError as e:
                    raise StorageError(f"partition {partition}: recovery failed: {e}") from e
                writer.reset()
            log.info("partition %d recovered at offset %d", partition, self._logs[partition].next_offset)
            return self._logs[partition].next_offset

    async def verify(self, partition: int) -> StorageError | None:
        """Check the partition's closed segments against its manifest (damage while
        running: a segment unlinked, truncated or changed). Damage refuses the partition
        from now on, as if open had found it; returns it (or the refusal it already had)."""
        self._held(partition)
        async with self._exclusive[partition]:
            if self.partition_error(partition) is not None:
                return self.partition_error(partition)
            damage = await asyncio.to_thread(self._logs[partition].verify)
            if damage is not None:
                self._open_errors[partition] = damage
                log.error("partition %d refused: %s", partition, damage)
            return damage

    async def clean(self, partition: int) -> CompactionStats:
        """Compact the closed segments of a partition once (the caller schedules it)."""
        async with self._exclusive[partition]:
            self._check(partition)
            cleaner = SegmentCleaner(self._logs[partition], self.delete_retention_ms)
            return await asyncio.to_thread(cleaner.clean, self._clock())
