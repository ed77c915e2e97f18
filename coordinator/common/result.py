"""What a handler returns to the runtime: records to append plus responses, never side
effects (Kafka's `CoordinatorResult`).

A handler reads state and returns a `Result`. The runtime replays `records` into the
shard (unless `replay` is False: classic membership is soft state the handler already
changed, and its GroupMetadata record is only a snapshot for loading), appends them as
one batch, and releases `response` and every `Reply` once the batch is durable. Then it
runs `after_commit` on the same partition executor and treats its Result the same way.

A handler whose work grows with its request (an OffsetCommit naming 100,000 partitions)
may return `Slices` instead: a generator that makes the records a slice at a time, one
`next()` each, and returns the Result that ends it (its records, if any, after the
slices'). The runtime keeps the partition's executor for it from the first slice to the
end and lets the loop run between slices, then writes all the records as one batch, as
for a Result: nothing else on the partition sees part of it.

A parked request (JoinGroup, SyncGroup) gets a `ReplyHandle` from the runtime; the state
machine keeps it on the member and answers it later with a `Reply`, possibly from
another member's request or from a timer.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from coordinator.records import CoordinatorRecord

# Opaque to the state machine, which only hands it back in a `Reply`: the runtime's own
# handle (`runtime/replies.py`, `FutureReplyHandle`), typed there.
ReplyHandle = Any


@dataclass(frozen=True, slots=True)
class Reply:
    handle: ReplyHandle
    response: Any


class Transaction(NamedTuple):
    """A Result written in a client's transaction, as Kafka's coordinator writes one: its
    records in a transactional batch of the client's producer (`marker` None, replayed as
    pending offsets of that producer), or the transaction's end marker (`marker`
    `MARKER_COMMIT` or `MARKER_ABORT`, no records; replayed as the end of its pending offsets)."""
    producer_id: int
    producer_epoch: int
    marker: int | None = None


MARKER_ABORT = 0        # Kafka's ControlRecordType
MARKER_COMMIT = 1


@dataclass(frozen=True, slots=True)
class Result:
    records: tuple[CoordinatorRecord, ...] = ()
    response: Any = None
    replies: tuple[Reply, ...] = ()
    after_commit: Callable[[], Result] | None = None
    replay: bool = True
    transaction: Transaction | None = None


EMPTY_RESULT = Result()

Slices = Generator[tuple[CoordinatorRecord, ...], None, Result]


def whole(slices: Slices) -> Result:
    """`slices` run to the end in one step: the Result of a request small enough for it."""
    records: list[CoordinatorRecord] = []
    while True:
        try:
            records += next(slices)
        except StopIteration as end:
            result: Result = end.value
            return replace(result, records=(*records, *result.records))
