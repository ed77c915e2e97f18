"""Reads one partition of the state topic as its new owner must see it.

Fetch with isolation READ_COMMITTED returns the data below the last stable offset and,
with it, the aborted transactions (producer id, first offset) it covers. A transactional
batch inside an aborted transaction is dropped, unless its producer is kgc's own for the
partition: `own_producer_id`, or one that committed a transaction earlier in the partition
(the id an earlier owner wrote with, before the transactional id's epochs ran out). The
owner acknowledges a batch once its Produce is on every in-sync replica, inside a
transaction it ends later (store.py), so an owner that died or was fenced leaves
acknowledged batches in a transaction its successor's InitProducerId aborted. Those are kept, and named (`StateRead.aborted`), so that the store can commit
them again before Kafka's cleaner drops them. Control batches are dropped. What is left
is handed back as plain batches at their own offsets (the loader needs no transaction
logic for kgc's own writes), with their producer id and epoch.

The read ends at the high watermark: the owner reads after its InitProducerId, which
completed every transaction on the partition, so nothing above the last stable offset is
still undecided. A log whose end does not move past an open transaction within the
timeout is an error, not a guess.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka.protocol.consumer import FetchRequest, FetchResponse

from coordinator.gateway.upstream import UpstreamUnavailable
from coordinator.gateway.upstream_topic import UpstreamTopic
from protocol.errors import ErrorCode
from storage.api import CONTROL_ABORT, StoredBatch
from storage.format import BatchDecodeError, StopReason, control_type, iter_batches

_FETCH_VERSION = 5          # read_committed, with the log start offset
_READ_COMMITTED = 1
_MAX_BYTES = 8 << 20
_RETRY_S = 0.05


class ReadError(Exception):
    pass


@dataclass(slots=True)
class StateRead:
    batches: list[StoredBatch]
    end: int                        # the next offset the topic will write
    # Base offsets of the kept batches of kgc's own aborted transactions.
    aborted: set[int] = field(default_factory=set)


async def read_state(topic: UpstreamTopic, partition: int, own_producer_id: int, *, start: int = 0,
                     timeout_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> StateRead:
    """The batches of `partition` from `start` that its owner keeps, and its end offset."""
    deadline = clock() + timeout_s
    read = StateRead([], start)
    position = start
    aborted: list[tuple[int, int]] = []     # (first offset, producer id) of aborted transactions, as fetched
    open_aborts: set[int] = set()
    committed = {own_producer_id}           # producer ids whose aborted batches are kept
    while True:
        data = await _fetch(topic, partition, position, deadline, clock)
        aborted = sorted(aborted + [(t.first_offset, t.producer_id) for t in data.aborted_transactions or ()])
        reader = iter_batches(data.records or b"")
        try:
            fetched = list(reader)
        except BatchDecodeError as exc:
            raise ReadError(f"{topic.topic}-{partition}: unreadable batch at offset {position}: {exc}") from exc
        # A fetch may end inside a batch (its size limit); anything else is damage, named.
        if reader.stop is not None and reader.stop.reason is not StopReason.SHORT:
            raise ReadError(f"{topic.topic}-{partition}: damaged batch after offset {position}: {reader.stop}")
        for _, batch in fetched:
            if batch.last_offset < position:
                continue
            position = batch.last_offset + 1
            # Kafka's consumer (CompletedFetch): an aborted transaction applies from its first offset.
            while aborted and aborted[0][0] <= batch.last_offset:
                open_aborts.add(aborted.pop(0)[1])
            pid = batch.producer_id
            if batch.is_control:
                if batch.records and control_type(batch.records[0].key) == CONTROL_ABORT:
                    open_aborts.discard(pid)
                continue
            if batch.is_transactional and pid in open_aborts:
                if pid not in committed:
                    continue
                read.aborted.add(batch.base_offset)
            elif batch.is_transactional:
                committed.add(pid)
            # Kept, so plain to the loader; the writer's producer id and epoch stay, for the
            # audit and for checking that no two owners wrote a partition at once.
            read.batches.append(StoredBatch(batch.base_offset, batch.last_offset, batch.records,
                                            max_timestamp_ms=batch.max_timestamp_ms, producer_id=pid,
                                            producer_epoch=batch.producer_epoch))
        stable = data.last_stable_offset
        if position >= data.high_watermark and stable >= data.high_watermark:
            read.end = data.high_watermark
            return read
        if not fetched:
            if clock() >= deadline:
                raise ReadError(f"{topic.topic}-{partition}: a transaction stays open at offset {stable} "
                                f"(high watermark {data.high_watermark}) after {timeout_s:.0f} s")
            await asyncio.sleep(_RETRY_S)


async def _fetch(topic: UpstreamTopic, partition: int, position: int, deadline: float, clock: Callable[[], float]):
    cls = FetchRequest[_FETCH_VERSION]
    request = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=_MAX_BYTES, isolation_level=_READ_COMMITTED,
                  topics=[cls.FetchTopic(topic=topic.topic, partitions=[cls.FetchTopic.FetchPartition(
                      partition=partition, fetch_offset=position, log_start_offset=-1,
                      partition_max_bytes=_MAX_BYTES)])])
    while True:
        try:
            conn = await topic.leader(partition)
            response = await topic.request(conn, request, FetchResponse)
            data = response.responses[0].partitions[0]
            code = ErrorCode(data.error_code)
        except (UpstreamUnavailable, TimeoutError, OSError) as exc:
            code, reason = ErrorCode.REQUEST_TIMED_OUT, repr(exc)
        else:
            reason = code.name
        if code is ErrorCode.NONE:
            return data
        if code is ErrorCode.OFFSET_OUT_OF_RANGE and position == 0:
            raise ReadError(f"{topic.topic}-{partition}: offset 0 is out of range; records were deleted upstream")
        topic.forget_leader(partition)
        if clock() >= deadline:
            raise ReadError(f"{topic.topic}-{partition}: fetch from {position} answered {reason}")
        await asyncio.sleep(_RETRY_S)
