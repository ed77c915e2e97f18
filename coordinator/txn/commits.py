"""TxnOffsetCommit and AddOffsetsToTxn through kgc, over a `Participant` and its tail.

TxnOffsetCommit (v0-4, the classic flow of research/eos.md §5.3):
1. the participant record goes into the client's transaction upstream (offset `o` in P);
2. the tail of P passes `o`, so every earlier marker of P is in kgc's log;
3. the group partition validates the request and writes its offsets as a transactional
   batch of the client's producer (pending, each naming `o`), answered once durable.
A failure before 3 writes nothing here: the client retries (a lost participant record is
an orphan its transaction's marker ends with nothing pending), or its transaction aborts.
After 3 the marker in P decides: the tail writes Kafka's COMMIT or ABORT into the group
partition, which applies or drops the offsets.

A TxnOffsetCommit follows its AddOffsetsToTxn at once (librdkafka and Java send it as soon
as the answer arrives). When `commit_follow_ms` after a successful one the transaction is
still open upstream with P in it and P holds nothing of it (no TxnOffsetCommit was staged,
here or, with several instances, at the group's owner), the client is taken to be stuck
and is told to look again (`add_offsets`' `on_stuck`):
librdkafka (2.10 on, still open in 2.16: confluentinc/librdkafka#5511) re-bootstraps when
every broker it knows goes down at once, which a restart of kgc always does since kgc
serves every listener, and its coordinator cache keeps the group's coordinator handle it
has just decommissioned. Its TxnOffsetCommit then waits for that dead handle to connect,
past `send_offsets_to_transaction`'s timeout (#5456), until some connection of the client
goes up or down: that is the only thing that makes it query the coordinator again. With
several instances (the replicated store) the same happens when the group's owner dies, and
the client is told to look again only once the ownership session has timed out (the others
have taken the partition over), since it would find the dead owner again before that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from coordinator import metrics
from coordinator.common.result import MARKER_COMMIT
from coordinator.group.context import RequestContext
from coordinator.partitioning import partition_for
from coordinator.runtime.api import PartitionNotActive, RuntimeApi
from coordinator.txn.participant import Participant
from coordinator.txn.tailer import MarkerTailer
from protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)

COMMIT_FOLLOW_MS = 3_000


class TransactionalCommits:
    def __init__(self, runtime: RuntimeApi, participant: Participant, tailer_of: Any, *,
                 commit_timeout_ms: int = 30_000, commit_follow_ms: int = COMMIT_FOLLOW_MS):
        self._runtime = runtime
        self._participant = participant
        self.tailer: MarkerTailer = tailer_of(self._on_marker)
        self._timeout_s = commit_timeout_ms / 1000
        self._follow_s = commit_follow_ms / 1000
        # (transactional id, producer id, epoch) → the call that tells the client to look
        # again, due unless its TxnOffsetCommit comes first
        self._awaiting_commit: dict[tuple[str, int, int], asyncio.TimerHandle] = {}
        self._checks: set[asyncio.Future] = set()

    async def resume(self) -> None:
        """After a (re)start: tail every partition served here that holds undecided offsets
        from the oldest participant record among them."""
        for p in sorted(self._runtime.owned):
            await self.resume_partition(p)

    async def resume_partition(self, partition: int) -> None:
        """A partition loaded here (at start, or taken over from another instance)."""
        try:
            start = await self._runtime.read(partition, lambda shard: shard.txn_tail_start())
        except PartitionNotActive:
            return      # moved on meanwhile: its new owner tails it
        if start is not None:
            log.info("group partition %d has undecided transactional offsets: tailing from %d", partition, start)
            self.tailer.watch(partition, start)

    async def forget(self, partition: int) -> None:
        """A partition another instance serves now: its owner tails it."""
        await self.tailer.unwatch(partition)

    def submit(self, ctx: RequestContext, request: Any) -> asyncio.Future:
        waiting = self._awaiting_commit.pop(
            (request.transactional_id, request.producer_id, request.producer_epoch), None)
        if waiting is not None:
            waiting.cancel()
        return asyncio.ensure_future(self._commit(ctx, request))

    def close(self) -> None:
        waiting, self._awaiting_commit = self._awaiting_commit, {}
        for handle in waiting.values():
            handle.cancel()
        for check in self._checks:
            check.cancel()

    async def _commit(self, ctx: RequestContext, request: Any) -> Any:
        if not request.group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "empty group id")
        p = partition_for(request.group_id, self._runtime.num_partitions)
        # Wait for the partition before writing upstream: a loading one answers retriably.
        await self._runtime.read(p, lambda shard: None)
        staged = {
            "group_id": request.group_id, "member_id": getattr(request, "member_id", ""),
            "generation": getattr(request, "generation_id", -1),
            "topics": [{"name": t.name, "partitions": [[q.partition_index, q.committed_offset] for q in t.partitions]}
                       for t in request.topics]}
        source = await self._participant.stage(request.transactional_id, request.producer_id,
                                               request.producer_epoch, p, staged, ctx.api_version)
        log.debug("[group=%s] TxnOffsetCommit of producer %d staged at %s-%d offset %d", request.group_id,
                  request.producer_id, getattr(self._participant, "topic", "participant"), p, source)
        self.tailer.watch(p, source)
        try:
            await asyncio.wait_for(self.tailer.reached(p, source), self._timeout_s)
        except TimeoutError:
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the participant partition is not read") from None
        return await self._runtime.write(p, lambda shard, handle: shard.txn_commit_offsets(ctx, request, source))

    async def _on_marker(self, partition: int, producer_id: int, producer_epoch: int, marker: int,
                         offset: int) -> None:
        log.debug("partition %d: marker %d of producer %d (epoch %d) at %d", partition, marker, producer_id,
                  producer_epoch, offset)
        decided = await self._runtime.write(partition, lambda shard, handle: shard.end_transaction(
            producer_id, producer_epoch, marker, offset))
        if decided:
            metrics.TXN_MARKERS.labels(marker="commit" if marker == MARKER_COMMIT else "abort").inc()

    async def add_offsets(self, node_id: int | None, request: Any,
                          on_stuck: Callable[[], None] | None = None) -> ErrorCode:
        """AddOffsetsToTxn: the group's participant partition joins the transaction.
        `on_stuck` is called if no TxnOffsetCommit of the producer follows (module docstring)."""
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        p = partition_for(request.group_id, self._runtime.num_partitions)
        log.debug("[group=%s] AddOffsetsToTxn of %r (producer %d) on broker %s", request.group_id,
                  request.transactional_id, request.producer_id, node_id)
        code = await self._participant.add_to_transaction(node_id, request.transactional_id, request.producer_id,
                                                          request.producer_epoch, p)
        if code is ErrorCode.NONE and on_stuck is not None:
            key = (request.transactional_id, request.producer_id, request.producer_epoch)
            earlier = self._awaiting_commit.pop(key, None)
            if earlier is not None:
                earlier.cancel()
            self._awaiting_commit[key] = asyncio.get_running_loop().call_later(
                self._follow_s, self._check_stuck, key, node_id, p, on_stuck)
        return code

    def _check_stuck(self, key: tuple[str, int, int], node_id: int | None, partition: int,
                     on_stuck: Callable[[], None]) -> None:
        del self._awaiting_commit[key]
        task = asyncio.ensure_future(self._stuck(key, node_id, partition, on_stuck))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _stuck(self, key: tuple[str, int, int], node_id: int | None, partition: int,
                     on_stuck: Callable[[], None]) -> None:
        # With several instances (the replicated store) the TxnOffsetCommit goes to the
        # group's owner, which need not be this one (the instance that serves the
        # client's transaction coordinator): what it staged is in the participant
        # partition, which every instance can ask about, as it can the transaction's state.
        if not await self._participant.awaits_offsets(node_id, *key, partition):
            return
        log.info("no TxnOffsetCommit of %r (producer %d, epoch %d) followed its AddOffsetsToTxn in %.1f s: "
                 "telling the client to look its group coordinator up again (librdkafka#5511)", *key, self._follow_s)
        metrics.TXN_CLIENTS_TOLD_TO_LOOK_AGAIN.inc()
        on_stuck()
