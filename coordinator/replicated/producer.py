"""kgc's transactional producer for one partition of the state topic.

One transactional id per partition (`<prefix>.p<NN>`): whoever calls InitProducerId for
it last owns the partition, and the upstream's transaction coordinator fences every
earlier holder (their AddPartitionsToTxn, Produce and EndTxn fail with PRODUCER_FENCED or
INVALID_PRODUCER_EPOCH) and aborts the transaction they left open. The store writes its
batches inside a transaction it keeps open for a while (`begin`, then one `produce` per
batch, acks=all, then `commit`): a batch is durable once its Produce answers, on every
in-sync replica. A transaction the owner did not end (it died, or was fenced) is aborted
by the next owner's InitProducerId, which waits until the abort markers are written, so
the next owner reads everything the last one wrote and keeps it (store.py).

Retriable answers (a leader or coordinator moving, CONCURRENT_TRANSACTIONS while the last
transaction's markers are written) are retried until the write timeout; anything else
fails the write with `ProducerError`, and the store fails the partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from coordinator.gateway.upstream_topic import UpstreamTopic
from protocol.errors import ErrorCode
from storage.api import LogRecord, TxnBatch
from storage.format import encode_producer_batch

log = logging.getLogger(__name__)

_INIT_PRODUCER_ID_VERSION = 4
_ADD_PARTITIONS_VERSION = 3
_PRODUCE_VERSION = 8
_END_TXN_VERSION = 3              # transaction version 1: the epoch stays across transactions
_TRANSACTION_KEY = 1
_RETRY_S = 0.01
_CONCURRENT_RETRY_S = 0.002
_RETRY_MAX_S = 0.5

_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
})
_COORDINATOR_MOVED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


class ProducerError(Exception):
    def __init__(self, message: str, code: ErrorCode | None = None):
        super().__init__(message)
        self.code = code

    @property
    def fenced(self) -> bool:
        return self.code in FENCED


class PartitionProducer:
    def __init__(self, topic: UpstreamTopic, partition: int, transactional_id: str, *,
                 transaction_timeout_ms: int = 60_000, write_timeout_ms: int = 30_000,
                 clock: Callable[[], float] = time.monotonic):
        self._topic = topic
        self.partition = partition
        self.transactional_id = transactional_id
        self._transaction_timeout_ms = transaction_timeout_ms
        self._write_timeout_s = write_timeout_ms / 1000
        self._clock = clock
        self._coordinator: int | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequence = 0

    async def claim(self) -> None:
        """InitProducerId: fences every earlier holder of the id and ends its open transaction."""
        request = InitProducerIdRequest[_INIT_PRODUCER_ID_VERSION](
            transactional_id=self.transactional_id, transaction_timeout_ms=self._transaction_timeout_ms,
            producer_id=-1, producer_epoch=-1)
        response = await self._with_coordinator("InitProducerId", request, InitProducerIdResponse,
                                                lambda r: r.error_code)
        self.producer_id, self.producer_epoch, self._sequence = response.producer_id, response.producer_epoch, 0
        log.debug("%s: producer id %d epoch %d", self.transactional_id, self.producer_id, self.producer_epoch)

    async def begin(self) -> None:
        """AddPartitionsToTxn: opens a transaction on the partition."""
        cls = AddPartitionsToTxnRequest[_ADD_PARTITIONS_VERSION]
        add = cls(v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
                  v3_and_below_producer_epoch=self.producer_epoch, v3_and_below_topics=[
                      cls.AddPartitionsToTxnTopic(name=self._topic.topic, partitions=[self.partition])])
        await self._with_coordinator("AddPartitionsToTxn", add, AddPartitionsToTxnResponse, _add_partitions_code)

    async def commit(self) -> None:
        """EndTxn(commit): the open transaction's marker follows what it wrote."""
        end = EndTxnRequest[_END_TXN_VERSION](transactional_id=self.transactional_id, producer_id=self.producer_id,
                                              producer_epoch=self.producer_epoch, committed=True)
        await self._with_coordinator("EndTxn", end, EndTxnResponse, lambda r: r.error_code)

    async def produce(self, records: Sequence[LogRecord], timestamp_ms: int) -> int:
        """One batch in the open transaction, on every in-sync replica; its base offset."""
        batch = encode_producer_batch(0, records, timestamp_ms, TxnBatch(self.producer_id, self.producer_epoch),
                                      base_sequence=self._sequence)
        cls = ProduceRequest[_PRODUCE_VERSION]
        request = cls(transactional_id=self.transactional_id, acks=-1, timeout_ms=int(self._write_timeout_s * 1000),
                      topic_data=[cls.TopicProduceData(name=self._topic.topic, partition_data=[
                          cls.TopicProduceData.PartitionProduceData(index=self.partition, records=batch)])])
        deadline = self._clock() + self._write_timeout_s
        attempt = 0
        while True:
            try:
                conn = await self._topic.leader(self.partition)
                response = await self._topic.request(conn, request, ProduceResponse)
                answer = response.responses[0].partition_responses[0]
                code = ErrorCode(answer.error_code)
            except (UpstreamUnavailable, TimeoutError, OSError) as exc:
                # The leader may be gone (SIGKILLed, say): the topic's metadata still names it
                # until asked again, and asking names the new leader once Kafka has elected one.
                code, answer = ErrorCode.NOT_LEADER_OR_FOLLOWER, None
                log.debug("%s: Produce failed: %r", self.transactional_id, exc)
            # A retry of a batch the leader has: the idempotent producer's duplicate answer.
            if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self._sequence += len(records)
                return answer.base_offset
            if code in _LEADER_MOVED:
                self._topic.forget_leader(self.partition)
            await self._retry_or_raise("Produce", code, deadline, attempt)
            attempt += 1

    async def _with_coordinator(self, what: str, request, response_class, code_of):
        deadline = self._clock() + self._write_timeout_s
        attempt = 0
        while True:
            try:
                conn = await self._coordinator_connection()
                response = await self._topic.request(conn, request, response_class)
                code = ErrorCode(code_of(response))
            except (UpstreamUnavailable, TimeoutError, OSError) as exc:
                code, response = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
                log.debug("%s: %s failed: %r", self.transactional_id, what, exc)
            if code is ErrorCode.NONE:
                return response
            if code in _COORDINATOR_MOVED:
                self._coordinator = None
            await self._retry_or_raise(what, code, deadline, attempt)
            attempt += 1

    async def _retry_or_raise(self, what: str, code: ErrorCode, deadline: float, attempt: int) -> None:
        if code not in _RETRIABLE:
            raise ProducerError(f"{self.transactional_id}: {what} answered {code.name}", code)
        if self._clock() >= deadline:
            raise ProducerError(f"{self.transactional_id}: {what} still {code.name} after "
                                f"{self._write_timeout_s:.0f} s", code)
        if code is ErrorCode.CONCURRENT_TRANSACTIONS:
            # The last transaction's markers are being written: done within milliseconds, and
            # every commit of the partition waits for it (the Java producer shortens its backoff
            # for this answer too).
            await asyncio.sleep(_CONCURRENT_RETRY_S)
            return
        # A leader or coordinator moving: that takes seconds.
        await asyncio.sleep(min(_RETRY_S * 2 ** attempt, _RETRY_MAX_S))

    async def _coordinator_connection(self) -> UpstreamConnection:
        if self._coordinator is None:
            found = await self._topic.cluster.find_coordinator(self.transactional_id, _TRANSACTION_KEY)
            self._coordinator = found.node_id
        return await self._topic.connection(self._coordinator)

def _add_partitions_code(response) -> int:
    codes = {p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}
    return next(iter(codes - {0}), 0)
