"""kgc's participant partition upstream: how kgc learns how a client's transaction ended.

The upstream's transaction coordinator writes a transaction's COMMIT or ABORT marker only
into the partitions that take part in it, and kgc never sees the upstream's
`__consumer_offsets`. So a partition kgc owns upstream takes part instead
(research/eos.md §4b, §5): topic `kgc-txn-offsets` (configurable), one partition per group
partition p, so P = p.

- AddOffsetsToTxn (the client's, to its transaction coordinator, through kgc's listener
  for that broker) becomes AddPartitionsToTxn v3 of partition P on kgc's own connection to
  the same broker: the coordinator checks the producer id and epoch exactly as it would
  have for the group's partition.
- TxnOffsetCommit: kgc writes one transactional batch to P with the *client's*
  transactional id, producer id and epoch (nothing binds a producer id to a connection
  upstream) and its own sequence per (P, producer). A v5 TxnOffsetCommit (transaction
  version 2) comes with no AddOffsetsToTxn before it: the Produce that writes the batch
  (v12) has P's leader add P to the transaction. The batch holds the request, for
  operators reading the topic. Its offset `o` orders it: every marker of this producer
  in P below `o` ended an earlier transaction, since the coordinator adds nothing to
  transaction N+1 before every marker of N is written.
- The tail of P (`tailer.py`) reads the markers.

The interface is `Participant`: in the replicated store (HA), the state-topic partition
itself can play this part, with the same three steps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    ProduceRequest,
    ProduceResponse,
)

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from coordinator.gateway.upstream_topic import UpstreamTopic
from protocol.errors import ApiError, ErrorCode
from storage.api import LogRecord, TxnBatch
from storage.format import encode_producer_batch

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "kgc-txn-offsets"
CLIENT_ID = "kgc-txn"
_ADD_PARTITIONS_VERSION = 3     # the last client version (v4+ are broker to broker)
# Transaction version 1 (AddOffsetsToTxn, then TxnOffsetCommit v0-4): v3-v10, the partition
# must already be in the transaction (verified, never added), as a TV1 client's Produce;
# v11 only changes which errors may come back.
_PRODUCE_VERSION = 8
# Transaction version 2 (TxnOffsetCommit v5, no AddOffsetsToTxn): from v12 the partition's
# leader adds the partition to the transaction itself (KIP-890 part 2), which is what
# Kafka's group coordinator asks of its own `__consumer_offsets` partition.
_PRODUCE_ADDS_PARTITION_VERSION = 12
_TXN_OFFSET_COMMIT_ADDS_PARTITION_VERSION = 5
SEQUENCES_KEPT = 100_000
_RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
              ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.LEADER_NOT_AVAILABLE}


class Participant(Protocol):
    """What TxnOffsetCommit needs of the partition that takes part in a client's transaction."""

    async def add_to_transaction(self, node_id: int | None, txn_id: str, producer_id: int, producer_epoch: int,
                                 partition: int) -> ErrorCode: ...

    async def stage(self, txn_id: str, producer_id: int, producer_epoch: int, partition: int,
                    request: dict[str, Any], version: int) -> int:
        """Write the request into the client's transaction; its offset in P. Raises ApiError."""

    async def awaits_offsets(self, node_id: int | None, txn_id: str, producer_id: int, producer_epoch: int,
                             partition: int) -> bool:
        """Whether the client's transaction is open with P in it and P holds nothing of it:
        no TxnOffsetCommit was staged, by this instance or any other."""


class ParticipantTopic(UpstreamTopic):
    def __init__(self, cluster: UpstreamCluster, num_partitions: int, *, topic: str = DEFAULT_TOPIC,
                 replication_factor: int = -1, request_timeout_ms: int = 30_000, commit_timeout_ms: int = 5_000,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(cluster, topic, num_partitions, client_id=CLIENT_ID, replication_factor=replication_factor,
                         request_timeout_ms=request_timeout_ms)
        self._commit_timeout_s = commit_timeout_ms / 1000
        self._clock = clock
        # (P, producer id) → (epoch, next sequence), the most recently used last, at most
        # `sequences_kept`; absent: ask the leader (DescribeProducers), one more round trip.
        self._sequences: dict[tuple[int, int], tuple[int, int]] = {}
        self.sequences_kept = SEQUENCES_KEPT
        # (P, producer id) → its lock and how many stages hold or wait for it; gone at 0,
        # so producers that come and go leave nothing behind.
        self._locks: dict[tuple[int, int], tuple[asyncio.Lock, list[int]]] = {}

    async def ensure(self) -> None:
        await super().ensure()
        log.info("participant topic %s ready (%d partitions)", self.topic, self.num_partitions)

    # ---- AddOffsetsToTxn -----------------------------------------------------------

    async def add_to_transaction(self, node_id: int | None, txn_id: str, producer_id: int, producer_epoch: int,
                                 partition: int) -> ErrorCode:
        """AddPartitionsToTxn of P to the broker the client took for its transaction
        coordinator (a broker that is not answers NOT_COORDINATOR, and the client looks again)."""
        cls = AddPartitionsToTxnRequest[_ADD_PARTITIONS_VERSION]
        request = cls(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer_id,
                      v3_and_below_producer_epoch=producer_epoch, v3_and_below_topics=[
                          cls.AddPartitionsToTxnTopic(name=self.topic, partitions=[partition])])
        try:
            conn = await (self.connection(node_id) if node_id is not None else self.leader(partition))
            response = await self.request(conn, request, AddPartitionsToTxnResponse)
        except (UpstreamUnavailable, TimeoutError) as exc:
            log.info("AddPartitionsToTxn of %s-%d for %r failed: %r", self.topic, partition, txn_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        codes = {ErrorCode(p.partition_error_code) for t in response.results_by_topic_v3_and_below
                 for p in t.results_by_partition}
        code = next(iter(codes - {ErrorCode.NONE}), ErrorCode.NONE)
        if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if code is ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            log.error("kgc may not write %s upstream: grant its principal WRITE on the topic", self.topic)
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        return code

    # ---- TxnOffsetCommit -------------------------------------------------------------

    async def stage(self, txn_id: str, producer_id: int, producer_epoch: int, partition: int,
                    request: dict[str, Any], version: int) -> int:
        # One batch in flight per (P, producer): its sequences stay in order. A producer
        # sends one TxnOffsetCommit at a time, so this waits only for a retry of its own.
        key = (partition, producer_id)
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                return await self._stage(txn_id, producer_id, producer_epoch, partition, request, version)
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._locks[key]

    def _remember(self, partition: int, producer_id: int, producer_epoch: int, next_sequence: int) -> None:
        key = (partition, producer_id)
        self._sequences.pop(key, None)
        self._sequences[key] = (producer_epoch, next_sequence)
        if len(self._sequences) > self.sequences_kept:
            del self._sequences[next(iter(self._sequences))]      # the least recently used

    async def _stage(self, txn_id: str, producer_id: int, producer_epoch: int, partition: int,
                     request: dict[str, Any], version: int) -> int:
        deadline = self._clock() + self._commit_timeout_s
        value = json.dumps({"v": 0, "apiVersion": version, **request}, separators=(",", ":")).encode()
        record = LogRecord(request["group_id"].encode(), value)
        resynced = False
        while True:
            try:
                conn = await self.leader(partition)
                sequence = await self._next_sequence(conn, partition, producer_id, producer_epoch)
                code, offset = await self._produce(conn, txn_id, producer_id, producer_epoch, partition, sequence,
                                                   record, adds_partition=version >= _TXN_OFFSET_COMMIT_ADDS_PARTITION_VERSION)
            except (UpstreamUnavailable, TimeoutError) as exc:
                # The leader may be gone (killed, say): ask the metadata again, which
                # names the new one once the controller has moved the partition.
                code, offset = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
                log.info("participant produce to %s-%d failed: %r", self.topic, partition, exc)
            if code is ErrorCode.NONE:
                self._remember(partition, producer_id, producer_epoch, sequence + 1)
                return offset
            self._sequences.pop((partition, producer_id), None)
            if code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and not resynced:
                resynced = True
                continue
            if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                raise ApiError(ErrorCode.INVALID_PRODUCER_EPOCH, "the producer was fenced")
            if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
                raise ApiError(ErrorCode.TRANSACTION_ABORTABLE if version >= 4 else ErrorCode.INVALID_TXN_STATE,
                               "the group's partition is not in the transaction")
            if code is ErrorCode.INVALID_PRODUCER_ID_MAPPING:
                raise ApiError(code, "the producer id is not the transactional id's")
            if code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
                log.error("kgc may not write %s upstream for %r (%s): grant its principal WRITE on the topic and "
                          "on the transactional ids", self.topic, txn_id, code.name)
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "kgc may not write its participant topic")
            if code not in _RETRIABLE and code is not ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                log.warning("participant produce to %s-%d for %r: %s", self.topic, partition, txn_id, code.name)
                raise ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"participant produce failed: {code.name}")
            if self._clock() >= deadline:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"participant produce: {code.name}")
            if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.LEADER_NOT_AVAILABLE):
                self.forget_leader(partition)
            await asyncio.sleep(0.1)

    async def awaits_offsets(self, node_id: int | None, txn_id: str, producer_id: int, producer_epoch: int,
                             partition: int) -> bool:
        try:
            conn = await (self.connection(node_id) if node_id is not None else self.leader(partition))
            response = await self.request(conn, DescribeTransactionsRequest[0](transactional_ids=[txn_id]),
                                          DescribeTransactionsResponse)
            txn = response.transaction_states[0]
            if (txn.error_code or txn.transaction_state != "Ongoing" or txn.producer_id != producer_id
                    or txn.producer_epoch != producer_epoch
                    or not any(t.topic == self.topic and partition in t.partitions for t in txn.topics)):
                return False    # ended, or another transaction now, which has not added P yet
            state = await self._producer_state(await self.leader(partition), partition, producer_id)
        except (UpstreamUnavailable, TimeoutError, IndexError) as exc:
            log.info("could not tell whether %r awaits its TxnOffsetCommit: %r", txn_id, exc)
            return False        # not known: leave the client be
        return state is None or state.current_txn_start_offset < 0

    async def _producer_state(self, conn: UpstreamConnection, partition: int, producer_id: int) -> Any:
        """The leader's state of the producer in P (DescribeProducers), None if it has none."""
        cls = DescribeProducersRequest[0]
        response = await self.request(conn, cls(topics=[cls.TopicRequest(
            name=self.topic, partition_indexes=[partition])]), DescribeProducersResponse)
        for topic in response.topics:
            for p in topic.partitions:
                for state in p.active_producers:
                    if state.producer_id == producer_id:
                        return state
        return None

    async def _next_sequence(self, conn: UpstreamConnection, partition: int, producer_id: int,
                             producer_epoch: int) -> int:
        known = self._sequences.get((partition, producer_id))
        if known is not None and known[0] == producer_epoch:
            return known[1]
        if known is not None:
            return 0        # a new epoch starts at 0
        # kgc restarted or lost track (or another instance wrote): the leader knows the
        # producer's last sequence.
        state = await self._producer_state(conn, partition, producer_id)
        if state is not None and state.producer_epoch == producer_epoch:
            return state.last_sequence + 1
        return 0

    async def _produce(self, conn: UpstreamConnection, txn_id: str, producer_id: int, producer_epoch: int,
                       partition: int, sequence: int, record: LogRecord, *,
                       adds_partition: bool) -> tuple[ErrorCode, int]:
        batch = encode_producer_batch(0, [record], int(time.time() * 1000), TxnBatch(producer_id, producer_epoch),
                                      base_sequence=sequence)
        cls = ProduceRequest[_PRODUCE_ADDS_PARTITION_VERSION if adds_partition else _PRODUCE_VERSION]
        request = cls(transactional_id=txn_id, acks=-1, timeout_ms=int(self._commit_timeout_s * 1000), topic_data=[
            cls.TopicProduceData(name=self.topic, partition_data=[
                cls.TopicProduceData.PartitionProduceData(index=partition, records=batch)])])
        response = await self.request(conn, request, ProduceResponse)
        answer = response.responses[0].partition_responses[0]
        code = ErrorCode(answer.error_code)
        if code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            return ErrorCode.NONE, answer.base_offset     # written before: the original offset
        return code, answer.base_offset
