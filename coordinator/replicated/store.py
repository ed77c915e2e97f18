"""ReplicatedLogStore: the 50 partitions as a compacted topic on the upstream cluster.

A `LogStore` (storage/api.py) for instances that must not depend on one disk. Each
partition is written by its own transactional producer (producer.py), so the instance
that claims a partition last fences every earlier writer; its log is the topic's, read
back as read_committed sees it (reader.py). Records keep the `__consumer_offsets` format
and offsets are the topic's own: a tool reading the state topic and a tool reading kgc's
served `__consumer_offsets` see the same offsets.

`open` creates or checks the topic; `acquire(p)` claims a partition and reads it (the
runtime calls it before it loads the partition, on every instance the ownership gives it
to), `release(p)` waits for its last transaction and forgets it.

Clients' transactional offsets (TxnOffsetCommit) and their transactions' ends are written
as records of kgc's own and read back in Kafka's shape (client_txn.py).

In memory the store keeps what it read and wrote (a `MemoryLogStore`, `read` serves the
loader and the served topic from it). Appends go into the partition's open *group*; the
partition's flusher takes the open group, closes it, and writes it as one transaction
(group commit: one transaction per flush, however many appends). A closed group's
transaction ends with a marker, which takes one offset after its records: the store
leaves that offset out of its own numbering when it closes the group, so the next append
starts where the topic will put it. The runtime reads its next offset from `end_offset`
for that reason. `prepare` closes the open group too, so the end offset cannot move
between `prepare` and `append_prepared`. An append is durable when its transaction's
EndTxn succeeded, and the flusher checks that the topic put the batch where the store
numbered it; any disagreement or failure fails the partition, and `recover` claims it
again (a new epoch, so the old transaction is aborted) and reads it back from the topic.

A partition another instance claimed (this one was fenced) is not taken back by
`recover` unless the ownership map still gives it to this instance (`owns`): the other
claim was then a stale one, from an instance that had not yet heard the partition moved.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from coordinator.gateway.upstream_topic import UpstreamTopic
from coordinator.replicated.client_txn import ClientTransactions, loaded
from coordinator.replicated.producer import PartitionProducer, ProducerError
from coordinator.replicated.reader import ReadError, read_committed
from storage.api import (
    Append,
    DurableRead,
    LogRecord,
    PreparedBatch,
    RecordFields,
    StorageError,
    StoredBatch,
    TxnBatch,
)
from storage.memory_store import MemoryLogStore

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _Group:
    base_offset: int
    timestamp_ms: int
    records: list[LogRecord] = field(default_factory=list)


class FencedError(StorageError):
    """Another instance claimed the partition."""


class ReplicatedLogStore:
    def __init__(self, topic: UpstreamTopic, *, transactional_id_prefix: str, transaction_timeout_ms: int = 60_000,
                 write_timeout_ms: int = 30_000, clock: Callable[[], float] = time.monotonic):
        self.topic = topic
        self.num_partitions = topic.num_partitions
        self._mirror = MemoryLogStore(topic.num_partitions, manual_commit=True)
        self._producers = [
            PartitionProducer(topic, p, f"{transactional_id_prefix}.p{p:02d}",
                              transaction_timeout_ms=transaction_timeout_ms, write_timeout_ms=write_timeout_ms,
                              clock=clock)
            for p in range(topic.num_partitions)]
        self._read_timeout_s = write_timeout_ms / 1000
        self._clock = clock
        self._open: list[_Group | None] = [None] * topic.num_partitions
        self._closed: list[collections.deque[_Group]] = [collections.deque() for _ in range(topic.num_partitions)]
        self._flushers: dict[int, asyncio.Task] = {}
        self._fenced: dict[int, str] = {}
        self._clients = [ClientTransactions() for _ in range(topic.num_partitions)]
        # Whether the ownership map gives `p` to this instance now (set by the app).
        self.owns: Callable[[int], bool] = lambda partition: False

    # ---- lifecycle -------------------------------------------------------------------

    async def open(self) -> None:
        """The topic, created or checked; partitions are claimed one by one (`acquire`)."""
        await self.topic.ensure()

    async def close(self) -> None:
        await self._drain(list(self._flushers.values()))
        await self.topic.close()

    async def acquire(self, partition: int) -> None:
        self._fenced.pop(partition, None)
        end = await self._claim_and_read(partition)
        log.info("state partition %d claimed and read to offset %d", partition, end)

    async def release(self, partition: int) -> None:
        flusher = self._flushers.get(partition)
        await self._drain([flusher] if flusher is not None else [])
        self._mirror.restore(partition, (), 0)
        self._clients[partition] = ClientTransactions()

    @staticmethod
    async def _drain(flushers: list[asyncio.Task]) -> None:
        if flushers:
            _, pending = await asyncio.wait(flushers, timeout=CLOSE_TIMEOUT_S)
            for task in pending:
                task.cancel()

    async def _claim_and_read(self, partition: int) -> int:
        try:
            await self._producers[partition].claim()
            raw_batches, end = await read_committed(self.topic, partition, timeout_s=self._read_timeout_s,
                                                clock=self._clock)
            # Clients' transactions back in Kafka's shape (client_txn.py).
            batches = [b for raw in raw_batches for b in loaded(raw)]
        except (ProducerError, ReadError, ValueError) as exc:
            raise StorageError(f"state topic {self.topic.topic}-{partition}: {exc}") from exc
        clients = self._clients[partition] = ClientTransactions()
        for batch in batches:
            clients.replay(batch)
        self._mirror.restore(partition, batches, end)
        self._open[partition] = None
        self._closed[partition].clear()
        return end

    # ---- reads: what was read and written -------------------------------------------------

    def read(self, partition: int, from_offset: int = 0) -> Iterator[StoredBatch]:
        return self._mirror.read(partition, from_offset)

    def read_fields(self, partition: int, from_offset: int = 0) -> Iterator[tuple[bool, list[RecordFields]]]:
        return self._mirror.read_fields(partition, from_offset)

    def end_offset(self, partition: int) -> int:
        return self._mirror.end_offset(partition)

    def read_durable(self, partition: int, from_offset: int, max_bytes: int) -> DurableRead:
        return self._mirror.read_durable(partition, from_offset, max_bytes)

    def partition_error(self, partition: int) -> StorageError | None:
        return self._mirror.partition_error(partition)

    # ---- writes ---------------------------------------------------------------------------

    def append(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int,
               txn: TxnBatch | None = None) -> Append:
        base = self._mirror.end_offset(partition)
        append = self._mirror.append(partition, records, timestamp_ms, txn)
        if self._mirror.partition_error(partition) is not None:
            return append
        clients = self._clients[partition]
        if txn is None and records:
            clients.supersede(records)
            self._add(partition, base, records, timestamp_ms)
        elif txn is None:
            if partition not in self._flushers:
                # A barrier with nothing before it in flight: everything before it is durable.
                self._mirror.commit(partition, append.last_offset)
        elif txn.control is None:
            self._add(partition, base, clients.stage(records, txn), timestamp_ms)
        else:
            # The end takes one offset in the runtime's numbering, as Kafka's marker; what
            # follows it in the topic (copies, tombstones) is left out.
            written = clients.end(txn)
            self._add(partition, base, written, timestamp_ms)
            self._mirror.skip(partition, len(written) - 1)
        return append

    async def prepare(self, partition: int, records: Sequence[LogRecord], timestamp_ms: int) -> PreparedBatch:
        self._close(partition)
        return await self._mirror.prepare(partition, records, timestamp_ms)

    def append_prepared(self, prepared: PreparedBatch) -> Append:
        append = self._mirror.append_prepared(prepared)
        if prepared.count and self._mirror.partition_error(prepared.partition) is None:
            records = [LogRecord(r.key, r.value, r.headers) for r in prepared.payload]
            self._clients[prepared.partition].supersede(records)
            self._add(prepared.partition, prepared.base_offset, records, prepared.timestamp_ms)
        return append

    def _add(self, partition: int, base: int, records: Sequence[LogRecord], timestamp_ms: int) -> None:
        group = self._open[partition]
        if group is None:
            group = self._open[partition] = _Group(base, timestamp_ms)
        group.records.extend(records)
        if partition not in self._flushers:
            self._flushers[partition] = asyncio.get_running_loop().create_task(
                self._flush(partition), name=f"kgc-state-flush-{partition}")

    def _close(self, partition: int) -> None:
        """The open group becomes the next transaction; its marker's offset is left out."""
        group = self._open[partition]
        if group is None:
            return
        self._open[partition] = None
        self._closed[partition].append(group)
        self._mirror.skip(partition, 1)

    async def _flush(self, partition: int) -> None:
        producer = self._producers[partition]
        closed = self._closed[partition]
        try:
            while closed or self._open[partition] is not None:
                if not closed:
                    self._close(partition)
                group = closed[0]
                try:
                    base = await producer.write(group.records, group.timestamp_ms)
                except ProducerError as exc:
                    self._fail(partition, exc)
                    return
                if base != group.base_offset:
                    self._fail(partition, StorageError(
                        f"the state topic put a batch at offset {base}, not {group.base_offset}: "
                        "another writer or a lost marker; reading the partition again"))
                    return
                closed.popleft()
                # Its records and its marker: durable now.
                self._mirror.commit(partition, group.base_offset + len(group.records))
        finally:
            self._flushers.pop(partition, None)

    def _fail(self, partition: int, exc: Exception) -> None:
        if isinstance(exc, ProducerError) and exc.fenced:
            self._fenced[partition] = str(exc)
            log.error("state partition %d: another kgc instance claimed it (%s)", partition, exc)
        else:
            log.error("state partition %d: write failed: %s", partition, exc)
        self._open[partition] = None
        self._closed[partition].clear()
        self._mirror.fail(partition, exc)

    async def recover(self, partition: int) -> int:
        if partition in self._fenced:
            if not self.owns(partition):
                raise FencedError(f"state partition {partition} is another instance's now: "
                                  f"{self._fenced[partition]}")
            # Still ours by the ownership map: the claim that fenced us was a stale one (an
            # instance that had not yet heard that the partition moved). Take it back.
            del self._fenced[partition]
        end = await self._claim_and_read(partition)
        log.info("state partition %d claimed again and read to offset %d", partition, end)
        return end
