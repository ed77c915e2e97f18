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
partition's flusher takes the open group, closes it, and writes it as one Produce (group
commit: one batch per flush, however many appends). An append is durable when its
batch's Produce answered: acks=all, so it is on every in-sync replica. The batches go into
a transaction the flusher keeps open for up to `transaction_ms`, then ends (EndTxn) when
it closes the next group, or at once when nothing is left to write: one replicated append
per batch rather than five (AddPartitionsToTxn, Produce, EndTxn, the marker, the
transaction's completion), which a transaction per batch cost. The transaction's marker
takes one offset after its last batch: the store leaves that offset out of its own
numbering when it decides which group ends the transaction, so the next append starts
where the topic will put it. The runtime reads its next offset from `end_offset` for that
reason. `prepare` closes the open group too, and no transaction ends while a prepared
batch waits, so the end offset cannot move between `prepare` and `append_prepared`. The
flusher checks that the topic put each batch where the store numbered it; any
disagreement or failure fails the partition, and `recover` claims it again (a new epoch,
so the open transaction is aborted) and reads it back from the topic.

An owner that dies or is fenced leaves its open transaction to the next owner's
InitProducerId, which aborts it; what it acknowledged is in that transaction. The next
owner reads it too (reader.py keeps the aborted batches of kgc's own producer), and
before it serves the partition it commits again, as one transaction, every record whose
key has its latest record in an aborted batch: Kafka's cleaner drops aborted batches,
and the copies keep what they said.

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
from coordinator.replicated.reader import ReadError, StateRead, read_state
from storage.api import (
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
from storage.memory_store import MemoryLogStore

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0
# How long a transaction stays open for the batches that follow the first. Ending one
# costs the writes that a transaction per batch paid every time; a read_committed reader
# of the state topic (an audit) sees a batch once its transaction ends.
TRANSACTION_MS = 1_000
# How often an idle flusher looks again while a prepared batch holds its transaction open.
_PREPARED_WAIT_S = 0.01


@dataclass(slots=True)
class _Group:
    base_offset: int
    timestamp_ms: int
    records: list[LogRecord] = field(default_factory=list)
    ends_transaction: bool = False      # closed as its transaction's last: the marker's offset follows


class FencedError(StorageError):
    """Another instance claimed the partition."""


class ReplicatedLogStore:
    def __init__(self, topic: UpstreamTopic, *, transactional_id_prefix: str, transaction_timeout_ms: int = 60_000,
                 write_timeout_ms: int = 30_000, transaction_ms: int = TRANSACTION_MS,
                 clock: Callable[[], float] = time.monotonic):
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
        self._transaction_s = transaction_ms / 1000
        self._open: list[_Group | None] = [None] * topic.num_partitions
        # When the partition's open transaction began (None: none open), and what wakes its
        # idle flusher: a new group, or a release.
        self._began: list[float | None] = [None] * topic.num_partitions
        self._wake = [asyncio.Event() for _ in range(topic.num_partitions)]
        self._ending: set[int] = set()          # released or closing: end the transaction now
        self._preparing: set[int] = set()       # a prepared batch waits: no marker may take an offset
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
        for partition in list(self._flushers):
            self._end_now(partition)
        await self._drain(list(self._flushers.values()))
        await self.topic.close()

    async def acquire(self, partition: int) -> None:
        self._fenced.pop(partition, None)
        end = await self._claim_and_read(partition)
        log.info("state partition %d claimed and read to offset %d", partition, end)

    async def release(self, partition: int) -> None:
        flusher = self._flushers.get(partition)
        if flusher is not None:
            self._end_now(partition)
        await self._drain([flusher] if flusher is not None else [])
        self._mirror.restore(partition, (), 0)
        self._clients[partition] = ClientTransactions()

    def _end_now(self, partition: int) -> None:
        """The open transaction ends after what is queued, without waiting its time."""
        self._ending.add(partition)
        self._wake[partition].set()

    @staticmethod
    async def _drain(flushers: list[asyncio.Task]) -> None:
        if flushers:
            _, pending = await asyncio.wait(flushers, timeout=CLOSE_TIMEOUT_S)
            for task in pending:
                task.cancel()

    async def _claim_and_read(self, partition: int) -> int:
        producer = self._producers[partition]
        try:
            await producer.claim()
            read = await read_state(self.topic, partition, producer.producer_id, timeout_s=self._read_timeout_s,
                                    clock=self._clock)
            if read.aborted:
                read = await self._commit_again(partition, read)
            # Clients' transactions back in Kafka's shape (client_txn.py).
            batches = [b for raw in read.batches for b in loaded(raw)]
        except (ProducerError, ReadError, ValueError) as exc:
            raise StorageError(f"state topic {self.topic.topic}-{partition}: {exc}") from exc
        clients = self._clients[partition] = ClientTransactions()
        for batch in batches:
            clients.replay(batch)
        self._mirror.restore(partition, batches, read.end)
        self._open[partition] = None
        self._closed[partition].clear()
        self._began[partition] = None
        self._ending.discard(partition)
        self._preparing.discard(partition)
        return read.end

    async def _commit_again(self, partition: int, read: StateRead) -> StateRead:
        """`read` and, after it, one committed transaction holding every record whose key
        has its latest record in an aborted batch, in log order: an earlier owner's
        acknowledged writes, out of the cleaner's reach."""
        producer = self._producers[partition]
        latest: dict[bytes | None, tuple[bool, StoredRecord]] = {}
        for batch in read.batches:
            aborted = batch.base_offset in read.aborted
            for record in batch.records:
                latest[record.key] = (aborted, record)
        again = sorted((record for aborted, record in latest.values() if aborted), key=lambda r: r.offset)
        if not again:       # later records replaced all of them
            return read
        await producer.begin()
        base = await producer.produce([LogRecord(r.key or b"", r.value, r.headers) for r in again],
                                      max(r.timestamp_ms for r in again))
        await producer.commit()
        log.warning("state partition %d: %d records of an earlier owner's unfinished transaction committed "
                    "again at offset %d", partition, len(again), base)
        rest = await read_state(self.topic, partition, producer.producer_id, start=read.end,
                                timeout_s=self._read_timeout_s, clock=self._clock)
        return StateRead(read.batches + rest.batches, rest.end)

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
            if self._open[partition] is None and not self._closed[partition]:
                # A barrier with nothing before it unwritten: everything before it is durable.
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
        self._preparing.add(partition)
        try:
            return await self._mirror.prepare(partition, records, timestamp_ms)
        except BaseException:
            self._preparing.discard(partition)
            raise

    def append_prepared(self, prepared: PreparedBatch) -> Append:
        self._preparing.discard(prepared.partition)
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
        if partition in self._flushers:
            self._wake[partition].set()
        else:
            self._flushers[partition] = asyncio.get_running_loop().create_task(
                self._flush(partition), name=f"kgc-state-flush-{partition}")

    def _close(self, partition: int) -> None:
        """The open group becomes the next batch; the transaction's last, with its marker's
        offset left out, once the transaction is old enough or must end."""
        group = self._open[partition]
        if group is None:
            return
        self._open[partition] = None
        began = self._began[partition]
        group.ends_transaction = partition in self._ending or (
            began is not None and self._clock() - began >= self._transaction_s)
        if group.ends_transaction:
            self._mirror.skip(partition, 1)
        self._closed[partition].append(group)

    async def _flush(self, partition: int) -> None:
        producer = self._producers[partition]
        closed = self._closed[partition]
        wake = self._wake[partition]
        try:
            while True:
                if not closed and self._open[partition] is not None:
                    self._close(partition)
                if closed:
                    group = closed[0]
                    if self._began[partition] is None:
                        await producer.begin()
                        self._began[partition] = self._clock()
                    base = await producer.produce(group.records, group.timestamp_ms)
                    if base != group.base_offset:
                        raise StorageError(
                            f"the state topic put a batch at offset {base}, not {group.base_offset}: "
                            "another writer or a lost marker; reading the partition again")
                    closed.popleft()
                    last = group.base_offset + len(group.records) - 1
                    self._mirror.commit(partition, last)        # on every in-sync replica: durable
                    if group.ends_transaction:
                        await producer.commit()
                        self._began[partition] = None
                        self._mirror.commit(partition, last + 1)        # the marker's offset
                    continue
                began = self._began[partition]
                if began is None:
                    return
                wait_s = began + self._transaction_s - self._clock()
                if partition not in self._preparing and (wait_s <= 0 or partition in self._ending):
                    # Nothing left to write: the marker takes the next offset now.
                    marker = self._mirror.end_offset(partition)
                    self._mirror.skip(partition, 1)
                    await producer.commit()
                    self._began[partition] = None
                    self._mirror.commit(partition, marker)
                    continue
                wake.clear()
                try:
                    await asyncio.wait_for(wake.wait(), max(wait_s, _PREPARED_WAIT_S))
                except TimeoutError:
                    pass
        except (ProducerError, StorageError) as exc:
            self._fail(partition, exc)
        finally:
            self._flushers.pop(partition, None)
            self._ending.discard(partition)

    def _fail(self, partition: int, exc: Exception) -> None:
        if isinstance(exc, ProducerError) and exc.fenced:
            self._fenced[partition] = str(exc)
            log.error("state partition %d: another kgc instance claimed it (%s)", partition, exc)
        else:
            log.error("state partition %d: write failed: %s", partition, exc)
        self._open[partition] = None
        self._closed[partition].clear()
        self._began[partition] = None
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
