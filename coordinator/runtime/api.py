"""What the coordinator service asks of the partition runtimes.

`write` runs `op(shard, handle)` on the partition's serial executor, replays and appends
its records, and returns the response once the batch is durable; if the op parked the
request (Result.response is None), it returns what a later `Reply` to `handle` carries.
`read` runs `op(shard)` after every write before it is durable and returns its value.
`submit_write` and `submit_read` are the same without a coroutine, for the request path:
they return the answer itself when the partition could give it at once (an idle
partition runs the op inline), otherwise a future of it; they raise what `write` and
`read` raise.

A write's `scope` names what the op touches (the group id), so a failing op can be
isolated to it (see `partition.py`, "Fault isolation").

Both raise `PartitionLoading` (answer COORDINATOR_LOAD_IN_PROGRESS),
`PartitionNotActive` (NOT_COORDINATOR: failed, unloaded or not owned), or
`RuntimeClosed` (COORDINATOR_NOT_AVAILABLE). A parked request whose partition fails or
unloads gets `PartitionNotActive`. A client's request (`submit_write`, `submit_read`)
whose answer has waited on durability for the answer timeout gets `WriteTimedOut`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

from coordinator.common.result import ReplyHandle, Result, Slices
from coordinator.records import CoordinatorRecord


class PartitionLoading(Exception):
    pass


class PartitionNotActive(Exception):
    pass


class RuntimeClosed(Exception):
    pass


class WriteTimedOut(Exception):
    """The write a request's answer waits for is not durable within the answer timeout
    (Kafka's offsets.commit.timeout.ms): the request is answered with a retriable error,
    while the write goes on; its state stands once durable, or goes with a reload."""


class Shard(Protocol):
    """What a partition runtime needs of the state it serializes access to
    (`group.shard.GroupShard` is the one there is; a second group type lives inside it).

    The runtime only replays records into it and tells it when it is live: everything a
    request or timer does to it goes through the ops that `write` and `read` run."""

    def replay(self, offset: int, record: CoordinatorRecord) -> None: ...

    def replay_transactional(self, offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        """A record of a client's transaction: pending until its producer's marker."""

    def replay_end_transaction(self, producer_id: int, marker: int) -> None:
        """The producer's transaction ended (`MARKER_COMMIT` or `MARKER_ABORT`)."""

    def on_loaded(self) -> None: ...

    def on_unloaded(self) -> None: ...

    def isolate(self, scope: Hashable) -> Result:
        """The Result that puts `scope` right after an operation on it failed (see
        `partition.py`, "Fault isolation")."""
        ...


# A write: run on the partition's shard, it returns the Result to apply, or `Slices` that
# make it a slice at a time (`partition.py`, "Sliced ops").
WriteOp = Callable[[Any, ReplyHandle], Result | Slices]

class RuntimeApi(Protocol):
    """What the service needs of the runtime (`runtime.CoordinatorRuntime` is the one there is)."""

    num_partitions: int
    owned: set[int]             # the partitions this instance serves now

    async def write(self, partition: int, op: WriteOp,
                    scope: Hashable = None) -> Any: ...

    async def read(self, partition: int, op: Callable[[Any], Any]) -> Any: ...

    def submit_write(self, partition: int, op: WriteOp,
                     scope: Hashable = None) -> Any: ...

    def submit_read(self, partition: int, op: Callable[[Any], Any]) -> Any: ...

