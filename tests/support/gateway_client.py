"""Drives a GatewaySession the way the network layer does, with requests built by kafka-python."""

from __future__ import annotations

import asyncio
import itertools
import uuid

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from coordinator.gateway.session import GatewaySession
from protocol.headers import parse_request_header

RESPONSE_TIMEOUT_S = 5


class SessionClient:
    def __init__(self, session: GatewaySession):
        self.session = session
        self._correlation_ids = itertools.count(1)

    def send(self, request) -> asyncio.Future | None:
        request.with_header(correlation_id=next(self._correlation_ids), client_id="gateway-tests")
        payload = request.encode(header=True)
        return self.session.forward(parse_request_header(payload), payload)

    async def call(self, request):
        return decode(request, await asyncio.wait_for(self.send(request), RESPONSE_TIMEOUT_S))


def decode(request, frame: bytes):
    """The response to `request` (a whole frame, as the session returns it), checked to
    carry its correlation id."""
    response = request.header.get_response_class().decode(frame, header=True, framed=True)
    assert response.header.correlation_id == request.header.correlation_id
    return response


def new_topic_name() -> str:
    return f"gateway-{uuid.uuid4().hex[:12]}"


def create_topic(name: str, partitions: int = 1) -> CreateTopicsRequest:
    topic = CreateTopicsRequest.CreatableTopic(version=5, name=name, num_partitions=partitions,
                                               replication_factor=1, assignments=[], configs=[])
    return CreateTopicsRequest[5](topics=[topic], timeout_ms=5000, validate_only=False)


def metadata(*topics: str, version: int = 12) -> MetadataRequest:
    return MetadataRequest[version](
        topics=[MetadataRequest.MetadataRequestTopic(version=version, name=t) for t in topics],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def records(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=0, key=None, value=value)
    builder.close()
    return builder.buffer()


def produce(topic: str, *values: bytes, acks: int = -1, version: int = 11) -> ProduceRequest:
    data = ProduceRequest.TopicProduceData(version=version, name=topic, partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(version=version, index=0, records=records(*values))])
    return ProduceRequest[version](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[data])


def fetch(topic_id: uuid.UUID, offset: int, *, max_wait_ms: int = 500, version: int = 16) -> FetchRequest:
    partition = FetchRequest.FetchTopic.FetchPartition(
        version=version, partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20)
    return FetchRequest[version](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(version=version, topic_id=topic_id, partitions=[partition])],
        forgotten_topics_data=[], rack_id="")


def list_offsets(topic: str, timestamp: int = -1, version: int = 7) -> ListOffsetsRequest:
    partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
        version=version, partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
    return ListOffsetsRequest[version](replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(version=version, name=topic, partitions=[partition])])
