"""Transactional offsets (TxnOffsetCommit): pending per producer until their transaction ends.

Kafka's `OffsetMetadataManager` keeps offsets committed in a transaction apart, keyed by
producer id, until the transaction's marker: COMMIT makes each one the committed offset
unless a plain commit written *later in the log* replaced it (the log order wins over the
order of the markers: KAFKA-5247), ABORT drops them. A tombstone of a partition drops
its pending offsets too. While any are pending for a partition, an OffsetFetch with
`require_stable` answers UNSTABLE_OFFSET_COMMIT for it, and expiry leaves it alone.

kgc learns each transaction's outcome from its participant partition upstream
(`coordinator/txn/`): every pending record names the participant offset of the request
that staged it (header `kgc-txn-src`), so that after a restart the tail resumes where the
oldest undecided transaction began.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue

SOURCE_HEADER = "kgc-txn-src"

PartitionKey = tuple[str, str, int]     # group, topic, partition


class PendingOffset(NamedTuple):
    record_offset: int
    value: OffsetCommitValue


class TransactionalOffsets:
    """The pending side of one partition's offsets; `apply` writes into the committed side."""

    def __init__(self, apply: Callable[[int, OffsetCommitKey, OffsetCommitValue], None],
                 committed_at: Callable[[PartitionKey], int]):
        self._apply = apply
        self._committed_at = committed_at
        self.pending: dict[int, dict[PartitionKey, PendingOffset]] = {}
        self.open: dict[str, dict[tuple[str, int], set[int]]] = {}     # group → partition → producer ids
        self.sources: dict[int, int] = {}       # producer id → participant offset of its first pending record

    def replay(self, offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        key, value = record.key, record.value
        if not isinstance(key, OffsetCommitKey) or value is None:
            # Kafka writes nothing else in a transaction; a tombstone there would be a bug.
            raise ValueError(f"offset {offset}: a transactional record must be an offset commit, not {key!r}")
        self.pending.setdefault(producer_id, {})[(key.group, key.topic, key.partition)] = PendingOffset(offset, value)
        self.open.setdefault(key.group, {}).setdefault((key.topic, key.partition), set()).add(producer_id)
        source = _source(record)
        if source is not None and producer_id not in self.sources:
            self.sources[producer_id] = source

    def end(self, producer_id: int, commit: bool) -> None:
        entries = self.pending.pop(producer_id, {})
        self.sources.pop(producer_id, None)
        for (group, topic, partition), entry in entries.items():
            self._close(group, topic, partition, producer_id)
            if commit and entry.record_offset > self._committed_at((group, topic, partition)):
                self._apply(entry.record_offset, OffsetCommitKey(group, topic, partition), entry.value)

    def drop_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone: every producer's pending offset of the partition goes with it."""
        by_partition = self.open.get(group)
        if by_partition is None:
            return
        for producer_id in by_partition.get((topic, partition), set()).copy():
            self.pending.get(producer_id, {}).pop((group, topic, partition), None)
            self._close(group, topic, partition, producer_id)

    def _close(self, group: str, topic: str, partition: int, producer_id: int) -> None:
        by_partition = self.open.get(group, {})
        producers = by_partition.get((topic, partition))
        if producers is None:
            return
        producers.discard(producer_id)
        if not producers:
            del by_partition[(topic, partition)]
        if not by_partition:
            self.open.pop(group, None)

    def is_open(self, group: str, topic: str, partition: int) -> bool:
        return (topic, partition) in self.open.get(group, {})

    def has_open(self, group: str) -> bool:
        return group in self.open

    def tail_start(self) -> int | None:
        """Where the participant partition must be read from to resolve what is pending."""
        return min(self.sources.values(), default=None)

    def awaits(self, producer_id: int, marker_offset: int) -> bool:
        """Whether a marker of this producer at `marker_offset` ends its pending offsets:
        only one written after them (an older marker ended an earlier transaction)."""
        source = self.sources.get(producer_id)
        return producer_id in self.pending and (source is None or source < marker_offset)


def _source(record: CoordinatorRecord) -> int | None:
    for name, value in record.headers:
        if name == SOURCE_HEADER and value is not None:
            return int(value)
    return None
