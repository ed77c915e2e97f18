"""kgc's log served read-only as the `__consumer_offsets` topic, led by kgc's own node.

kgc's 50-partition log *is* `__consumer_offsets`, byte for byte (RecordBatch v2, Kafka's
key and value schemas), so tools that read that topic (Burrow, kafka-console-consumer
with the offsets formatter, stream jobs analysing commits) work against kgc unchanged.
Metadata lists the topic with kgc's node as the leader of every partition
(`offsets_metadata.py`), so clients send the partition-led requests for it to the
bootstrap listener, which answers them here; kgc leads no other partition, so other
topics named there get NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata).
With several instances (`store = "replicated"`) each partition is led by the instance that
owns it (`owner_node`), which alone holds it in memory; another one answers
NOT_LEADER_OR_FOLLOWER for it (`serves`), and the client asks Metadata again.

| request (bootstrap listener) | answer |
|---|---|
| Fetch | durable batches from the fetch offset, as stored; high watermark = durable end |
| ListOffsets | earliest: the log start; latest: the durable end; a timestamp: the first record at or after it |
| Produce, DeleteRecords | INVALID_TOPIC_EXCEPTION, as Kafka refuses writes to an internal topic |
| DeleteTopics, CreatePartitions (any listener) | TOPIC_AUTHORIZATION_FAILED when they name it; else forwarded |

Only what is durable is served: a commit not yet on disk (fsync) is not fetchable yet.
Fetch sessions (KIP-227): kgc never creates one (session id 0 in every answer, which
tells the client to keep sending full fetches); an incremental fetch of a session it
does not know gets FETCH_SESSION_ID_NOT_FOUND. A fetch that finds nothing waits up to
its max_wait_ms (capped at `MAX_WAIT_MS`) once, then answers what is there. The log
is compacted: offsets have gaps, which Kafka clients handle (they read batch offsets).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from coordinator.gateway.offsets_metadata import TOPIC, TOPIC_ID
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader

log = logging.getLogger(__name__)

FORWARD = object()  # `route`'s answer for a request that is not ours to answer
MAX_WAIT_MS = 500
_SIZE = struct.Struct(">i")
_LATEST, _EARLIEST, _MAX_TIMESTAMP = -1, -2, -3
_NO_SESSION = 0
_FULL_FETCH_EPOCHS = (-1, 0)   # KIP-227: -1 no session wanted, 0 open a new one
_PARTITION_LED = {ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.Produce, ApiKey.DeleteRecords}
_ADMIN = {ApiKey.DeleteTopics, ApiKey.CreatePartitions}
_READ_ONLY = f"kgc serves {TOPIC} read-only"


class OffsetsTopic:
    """`read_durable(p, from_offset, max_bytes)` and `read(p, from_offset)` are the log
    store's (`storage.api.LogStore`); reads run in a thread."""

    def __init__(self, store: Any, num_partitions: int, *, max_wait_ms: int = MAX_WAIT_MS,
                 sleep: Callable[[float], Any] = asyncio.sleep):
        self._store = store
        self.num_partitions = num_partitions
        self._max_wait_ms = max_wait_ms
        self._sleep = sleep
        # Several instances: the node that owns partition p (None: none yet), and whether
        # this one does now. The app sets both; alone, kgc leads and serves every partition.
        self.owner_node: Callable[[int], int | None] | None = None
        self.serves: Callable[[int], bool] = lambda partition: True

    def leaders(self, own_node_id: int) -> list[int | None]:
        """Each partition's leader as Metadata names it."""
        if self.owner_node is None:
            return [own_node_id] * self.num_partitions
        return [self.owner_node(p) for p in range(self.num_partitions)]

    def route(self, header: RequestHeader, payload: bytes, listener_node_id: int | None,
              expect_response: bool):
        """A future of the whole response frame, None (Produce acks=0: no answer), or FORWARD."""
        api_key = header.api_key
        if api_key in _PARTITION_LED and listener_node_id is None:
            if not expect_response:
                return None
            return asyncio.ensure_future(self._answer(header, payload))
        if api_key in _ADMIN:
            return self._admin(header, payload)
        return FORWARD

    async def _answer(self, header: RequestHeader, payload: bytes) -> bytes:
        # A body kafka-python cannot decode raises here: the connection closes, as for any bad frame.
        version, body = header.api_version, payload[header.header_len:]
        api_key = header.api_key
        if api_key == ApiKey.Fetch:
            response = await self._fetch(FetchRequest.decode(body, version=version), version)
        elif api_key == ApiKey.ListOffsets:
            response = await self._list_offsets(ListOffsetsRequest.decode(body, version=version), version)
        elif api_key == ApiKey.Produce:
            response = _refuse_produce(ProduceRequest.decode(body, version=version), version)
        else:
            response = _refuse_delete_records(DeleteRecordsRequest.decode(body, version=version), version)
        return _frame(response, header.correlation_id)

    # -- Fetch ---------------------------------------------------------------------------

    async def _fetch(self, request, version: int):
        session_error = _session_error(request, version)
        if session_error is not None:
            return FetchResponse(version=version, throttle_time_ms=0, error_code=session_error,
                                 session_id=_NO_SESSION, responses=[], node_endpoints=[])
        wanted = [(topic, p) for topic in request.topics for p in topic.partitions]
        max_bytes = request.max_bytes if version >= 3 else 2**31 - 1
        answers = await asyncio.to_thread(self._read_partitions, wanted, version, max_bytes)
        wait_ms = min(request.max_wait_ms, self._max_wait_ms)
        if wait_ms > 0 and not any(a.records for a in answers) and any(a.error_code == 0 for a in answers):
            await self._sleep(wait_ms / 1000)   # a long poll, once: what became durable meanwhile
            answers = await asyncio.to_thread(self._read_partitions, wanted, version, max_bytes)
        by_topic: dict[int, tuple[Any, list]] = {}
        for (topic, _), answer in zip(wanted, answers, strict=True):
            by_topic.setdefault(id(topic), (topic, []))[1].append(answer)
        responses = [FetchResponse.FetchableTopicResponse(
            version=version, topic=getattr(topic, "topic", None), topic_id=getattr(topic, "topic_id", None),
            partitions=partitions) for topic, partitions in by_topic.values()]
        return FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=_NO_SESSION,
                             responses=responses, node_endpoints=[])

    def _read_partitions(self, wanted: list, version: int, max_bytes: int) -> list:
        left = max_bytes
        answers: list[Any] = []     # kafka-python's PartitionData, which is untyped
        for topic, p in wanted:
            first = not any(a.records for a in answers)
            error, hw, log_start, records = self._read_one(topic, p, version, left, first)
            left -= len(records)
            answers.append(FetchResponse.FetchableTopicResponse.PartitionData(
                version=version, partition_index=p.partition, error_code=error, high_watermark=hw,
                last_stable_offset=hw, log_start_offset=log_start, aborted_transactions=[],
                preferred_read_replica=-1, records=records))
        return answers

    def _read_one(self, topic, p, version: int, left: int, first: bool) -> tuple[int, int, int, bytes]:
        error = self._topic_error(topic, version, p.partition)
        if error:
            return error, -1, -1, b""
        # KIP-74: the first batch of the first partition with data comes whole, whatever the limits.
        limit = min(p.partition_max_bytes, left)
        try:
            read = self._store.read_durable(p.partition, p.fetch_offset, max(limit, 0))
        except Exception as exc:  # StorageError: a failed or damaged partition
            log.warning("%s-%d unreadable for Fetch: %s", TOPIC, p.partition, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, b""
        if not read.log_start_offset <= p.fetch_offset <= read.durable_end_offset:
            return ErrorCode.OFFSET_OUT_OF_RANGE, read.durable_end_offset, read.log_start_offset, b""
        data = read.data if first or len(read.data) <= limit else b""
        return ErrorCode.NONE, read.durable_end_offset, read.log_start_offset, data

    def _topic_error(self, topic, version: int, partition: int) -> int:
        if version >= 13:
            if topic.topic_id != TOPIC_ID:
                return ErrorCode.UNKNOWN_TOPIC_ID
        elif topic.topic != TOPIC:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not 0 <= partition < self.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not self.serves(partition):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    # -- ListOffsets ---------------------------------------------------------------------

    async def _list_offsets(self, request, version: int):
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                error, timestamp, offset = await asyncio.to_thread(self._offset_for, topic.name, p)
                partitions.append(ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                    version=version, partition_index=p.partition_index, error_code=error,
                    old_style_offsets=[offset] if offset >= 0 else [], timestamp=timestamp,
                    offset=offset, leader_epoch=-1))
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(
                version=version, name=topic.name, partitions=partitions))
        return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)

    def _offset_for(self, topic: str, p) -> tuple[int, int, int]:
        if topic != TOPIC:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        if not 0 <= p.partition_index < self.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if not self.serves(p.partition_index):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        try:
            bounds = self._store.read_durable(p.partition_index, 2**63 - 1, 0)
            if p.timestamp == _LATEST:
                return ErrorCode.NONE, -1, bounds.durable_end_offset
            if p.timestamp == _EARLIEST:
                return ErrorCode.NONE, -1, bounds.log_start_offset
            return (ErrorCode.NONE, *self._by_timestamp(p.partition_index, p.timestamp, bounds.durable_end_offset))
        except Exception as exc:  # StorageError: a failed or damaged partition
            log.warning("%s-%d unreadable for ListOffsets: %s", TOPIC, p.partition_index, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1

    def _by_timestamp(self, partition: int, timestamp: int, end: int) -> tuple[int, int]:
        """The first record at or after `timestamp` (or the newest, for max-timestamp):
        a scan of the log, as kgc keeps no time index."""
        best = (-1, -1)
        for batch in self._store.read(partition, 0):
            if batch.base_offset >= end:
                break
            for record in batch.records:
                if timestamp == _MAX_TIMESTAMP:
                    if record.timestamp_ms >= best[0]:
                        best = (record.timestamp_ms, record.offset)
                elif record.timestamp_ms >= timestamp:
                    return record.timestamp_ms, record.offset
        return best

    # -- writes and deletes: refused -----------------------------------------------------

    def _admin(self, header: RequestHeader, payload: bytes):
        version, body = header.api_version, payload[header.header_len:]
        if header.api_key == ApiKey.DeleteTopics:
            request = DeleteTopicsRequest.decode(body, version=version)
            names = [t.name for t in request.topics] if version >= 6 else list(request.topic_names)
            ids = [t.topic_id for t in request.topics] if version >= 6 else []
            if TOPIC not in names and TOPIC_ID not in ids:
                return FORWARD
            response = DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=[
                _deleted(version, name, ids[i] if ids else None) for i, name in enumerate(names)])
        else:
            request = CreatePartitionsRequest.decode(body, version=version)
            names = [t.name for t in request.topics]
            if TOPIC not in names:
                return FORWARD
            response = CreatePartitionsResponse(version=version, throttle_time_ms=0, results=[
                CreatePartitionsResponse.CreatePartitionsTopicResult(
                    version=version, name=name, **_refusal(name)) for name in names])
        log.info("refused %s v%d naming %s: %s", ApiKey(header.api_key).name, version, TOPIC, _READ_ONLY)
        future = asyncio.get_running_loop().create_future()
        future.set_result(_frame(response, header.correlation_id))
        return future


def _session_error(request, version: int) -> int | None:
    if version < 7:
        return None
    if request.session_id == _NO_SESSION and request.session_epoch in _FULL_FETCH_EPOCHS:
        return None
    # We never hand out a session, so any other id or epoch names one we do not have.
    return ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def _refusal(name: str | None) -> dict:
    """A DeleteTopics/CreatePartitions result: ours refused; any other topic in the same
    request too, since kgc cannot forward part of a request (send them separately)."""
    if name == TOPIC:
        return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "error_message": _READ_ONLY}
    return {"error_code": ErrorCode.INVALID_REQUEST,
            "error_message": f"not sent upstream: the request also named {TOPIC}; send it alone"}


def _deleted(version: int, name: str | None, topic_id):
    return DeleteTopicsResponse.DeletableTopicResult(version=version, name=name, topic_id=topic_id,
                                                     **_refusal(name if topic_id != TOPIC_ID else TOPIC))


def _refuse_produce(request, version: int):
    responses = []
    for topic in request.topic_data:
        ours = (topic.topic_id == TOPIC_ID) if version >= 13 else topic.name == TOPIC
        error = ErrorCode.INVALID_TOPIC_EXCEPTION if ours else ErrorCode.NOT_LEADER_OR_FOLLOWER
        responses.append(ProduceResponse.TopicProduceResponse(
            version=version, name=getattr(topic, "name", None), topic_id=getattr(topic, "topic_id", None),
            partition_responses=[ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                version=version, index=p.index, error_code=error, base_offset=-1, log_append_time_ms=-1,
                log_start_offset=-1, record_errors=[],
                error_message=f"Cannot append to internal topic {TOPIC}" if ours else None)
                for p in topic.partition_data]))
    return ProduceResponse(version=version, responses=responses, throttle_time_ms=0, node_endpoints=[])


def _refuse_delete_records(request, version: int):
    topics = []
    for topic in request.topics:
        error = ErrorCode.INVALID_TOPIC_EXCEPTION if topic.name == TOPIC else ErrorCode.NOT_LEADER_OR_FOLLOWER
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(
            version=version, name=topic.name, partitions=[
                DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                    version=version, partition_index=p.partition_index, low_watermark=-1, error_code=error)
                for p in topic.partitions]))
    return DeleteRecordsResponse(version=version, throttle_time_ms=0, topics=topics)


def _frame(response, correlation_id: int) -> bytes:
    response.with_header(correlation_id=correlation_id)
    payload = bytes(response.encode(header=True))
    return _SIZE.pack(len(payload)) + payload
