"""The `__consumer_offsets` answers, over a real log store, at the versions clients send."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.admin.topics import CreatePartitionsRequest, CreatePartitionsResponse
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from coordinator.gateway.offsets_metadata import TOPIC, TOPIC_ID, add_offsets_topic, wants_offsets_topic
from coordinator.gateway.offsets_topic import FORWARD, OffsetsTopic
from protocol.errors import ErrorCode
from protocol.headers import parse_request_header
from storage.api import LogRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch, iter_batches
from storage.segment import segment_name

NODE = 2_000_000_000


async def _no_sleep(_s: float) -> None:
    return None


@pytest.fixture
async def store(tmp_path):
    s = FileLogStore(tmp_path, num_partitions=3)
    await s.open()
    yield s
    await s.close()


async def append(store, partition: int, n: int, timestamp_ms: int = 1_000) -> None:
    for i in range(n):
        await store.append(partition, [LogRecord(b"k%d" % i, b"v%d" % i)], timestamp_ms + i).durable


def request_frame(request, correlation_id: int = 7) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="t")
    return bytes(request.encode(header=True))


async def answer(topic: OffsetsTopic, request, response_class, listener=None):
    payload = request_frame(request)
    header = parse_request_header(payload)
    routed = topic.route(header, payload, listener, True)
    assert routed is not FORWARD
    frame = await routed
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return response_class.decode(frame[4:], version=request.API_VERSION, header=True)


def fetch(version: int, offset: int, *, partition: int = 0, max_bytes: int = 1 << 20,
          partition_max_bytes: int = 1 << 20, session_id: int = 0, session_epoch: int = -1, max_wait_ms=0):
    topic = {"topic": TOPIC} if version < 13 else {"topic_id": TOPIC_ID}
    return FetchRequest[version](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
        session_id=session_id, session_epoch=session_epoch, topics=[FetchRequest.FetchTopic(
            version=version, **topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
                version=version, partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[], rack_id="")


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17])
async def test_fetch_gives_durable_batches_byte_for_byte_with_the_durable_end_as_high_watermark(store, version):
    await append(store, 1, 4)
    topic = OffsetsTopic(store, 3, sleep=_no_sleep)
    response = await answer(topic, fetch(version, 2, partition=1), FetchResponse)
    [[p]] = [t.partitions for t in response.responses]
    assert (p.error_code, p.high_watermark) == (0, 4)
    assert p.log_start_offset == (0 if version >= 5 else -1)   # a v5 field
    assert bytes(p.records) == store.read_durable(1, 2, 1 << 20).data
    assert [b.base_offset for _, b in iter_batches(bytes(p.records))] == [2, 3]


async def test_fetch_limits_give_whole_batches_and_always_at_least_one(store):
    await append(store, 0, 5)
    one = len(store.read_durable(0, 0, 1).data)
    topic = OffsetsTopic(store, 3, sleep=_no_sleep)
    for limit, batches in ((1, 1), (2 * one, 2), (2 * one + one // 2, 2)):
        response = await answer(topic, fetch(12, 0, partition_max_bytes=limit), FetchResponse)
        records = bytes(response.responses[0].partitions[0].records)
        assert len(list(iter_batches(records))) == batches, limit
        response = await answer(topic, fetch(12, 0, max_bytes=limit), FetchResponse)
        assert len(list(iter_batches(bytes(response.responses[0].partitions[0].records)))) == batches


async def test_fetch_out_of_range_unknown_partition_and_other_topics_get_kafkas_errors(store):
    await append(store, 0, 2)
    topic = OffsetsTopic(store, 3, sleep=_no_sleep)
    response = await answer(topic, fetch(12, 5), FetchResponse)
    assert response.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    response = await answer(topic, fetch(12, 0, partition=9), FetchResponse)
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    other = fetch(12, 0)
    other.topics[0].topic = "elsewhere"
    response = await answer(topic, other, FetchResponse)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_fetch_sessions_are_declined_and_unknown_sessions_refused(store):
    topic = OffsetsTopic(store, 3, sleep=_no_sleep)
    opened = await answer(topic, fetch(12, 0, session_epoch=0), FetchResponse)
    assert (opened.error_code, opened.session_id) == (0, 0)   # KIP-227: 0 declines the session
    incremental = await answer(topic, fetch(12, 0, session_id=42, session_epoch=1), FetchResponse)
    assert incremental.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_fetch_over_a_compacted_log_starts_at_the_next_kept_offset(tmp_path):
    # A segment as compaction leaves it: offsets 1, 4 and 5 kept, the others gone.
    directory = partition_dir(tmp_path, 0)
    directory.mkdir(parents=True)
    (directory / segment_name(0)).write_bytes(
        b"".join(encode_batch(o, [LogRecord(b"k", b"v%d" % o)], 1) for o in (1, 4, 5)))
    store = FileLogStore(tmp_path, num_partitions=1)
    await store.open()
    try:
        topic = OffsetsTopic(store, 1, sleep=_no_sleep)
        response = await answer(topic, fetch(12, 2), FetchResponse)
        p = response.responses[0].partitions[0]
        assert (p.error_code, p.high_watermark) == (0, 6)
        assert [b.base_offset for _, b in iter_batches(bytes(p.records))] == [4, 5]
    finally:
        await store.close()


async def test_list_offsets_earliest_latest_and_by_timestamp(store):
    await append(store, 2, 4, timestamp_ms=1_000)
    topic = OffsetsTopic(store, 3, sleep=_no_sleep)
    for version in (1, 6, 8):
        request = ListOffsetsRequest[version](replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
            ListOffsetsRequest.ListOffsetsTopic(version=version, name=TOPIC, partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    version=version, partition_index=2, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1)
                for ts in (-2, -1, 1_002, 9_999)])])
        response = await answer(topic, request, ListOffsetsResponse)
        got = [(p.error_code, p.offset) for p in response.topics[0].partitions]
        assert got == [(0, 0), (0, 4), (0, 2), (0, -1)], version


async def test_an_instance_answers_reads_only_of_the_partitions_it_serves(store):
    # Several instances: another instance owns partition 1, so a read of it here is
    # NOT_LEADER_OR_FOLLOWER (the client asks Metadata again), never this one's empty memory.
    await append(store, 0, 2)
    topic = OffsetsTopic(store, 3, sleep=_no_sleep)
    topic.serves = lambda partition: partition != 1
    for partition, expected in ((0, ErrorCode.NONE), (1, ErrorCode.NOT_LEADER_OR_FOLLOWER)):
        response = await answer(topic, fetch(12, 0, partition=partition), FetchResponse)
        assert response.responses[0].partitions[0].error_code == expected
        request = ListOffsetsRequest[6](replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
            ListOffsetsRequest.ListOffsetsTopic(version=6, name=TOPIC, partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    version=6, partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
        response = await answer(topic, request, ListOffsetsResponse)
        assert response.topics[0].partitions[0].error_code == expected


async def test_create_partitions_naming_the_topic_is_refused_and_others_forwarded(store):
    topic = OffsetsTopic(store, 3)
    def create(name):
        return CreatePartitionsRequest[2](topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            version=2, name=name, count=60, assignments=None)], timeout_ms=1000, validate_only=False)
    response = await answer(topic, create(TOPIC), CreatePartitionsResponse, listener=111)
    assert [r.error_code for r in response.results] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    payload = request_frame(create("mine"))
    assert topic.route(parse_request_header(payload), payload, 111, True) is FORWARD


@pytest.mark.parametrize("version", [1, 5, 7, 9, 10, 12])
def test_metadata_lists_the_topic_once_internal_and_led_by_kgc(version):
    upstream = MetadataResponse(version=version, throttle_time_ms=0, brokers=[
        MetadataResponse.MetadataResponseBroker(version=version, node_id=111, host="h", port=1, rack=None)],
        cluster_id="c", controller_id=111, authorized_operations=None, error_code=0, topics=[
            MetadataResponse.MetadataResponseTopic(
                version=version, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=TOPIC, topic_id=None,
                is_internal=False, partitions=[], authorized_operations=None),
            MetadataResponse.MetadataResponseTopic(
                version=version, error_code=0, name="t", topic_id=None, is_internal=False, authorized_operations=None,
                partitions=[MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                    version=version, error_code=0, partition_index=0, leader_id=111, leader_epoch=3,
                    replica_nodes=[111], isr_nodes=[111], offline_replicas=[])])])
    upstream.with_header(correlation_id=9)
    payload = add_offsets_topic(bytes(upstream.encode(header=True)), version, [NODE] * 50)
    decoded = MetadataResponse.decode(payload, version=version, header=True)
    assert [t.name for t in decoded.topics] == ["t", TOPIC]
    ours = decoded.topics[1]
    assert ours.error_code == 0 and ours.is_internal
    assert [(p.partition_index, p.leader_id, p.replica_nodes) for p in ours.partitions] == [
        (p, NODE, [NODE]) for p in range(50)]
    assert decoded.topics[0].partitions[0].leader_id == 111


@pytest.mark.parametrize("version", [1, 7, 12])
def test_metadata_names_each_partitions_owner_as_its_leader_and_none_yet_as_unavailable(version):
    upstream = MetadataResponse(version=version, throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=1,
                                authorized_operations=None, error_code=0, topics=[])
    upstream.with_header(correlation_id=9)
    payload = add_offsets_topic(bytes(upstream.encode(header=True)), version, [NODE, NODE + 1, None])
    [ours] = MetadataResponse.decode(payload, version=version, header=True).topics
    assert [(p.partition_index, p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) for p in ours.partitions] == [
        (0, 0, NODE, [NODE], [NODE]), (1, 0, NODE + 1, [NODE + 1], [NODE + 1]),
        (2, ErrorCode.LEADER_NOT_AVAILABLE, -1, [], [])]


def test_metadata_requests_that_want_the_topic():
    def body(version, topics):
        return bytes(MetadataRequest[version](topics=topics, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False).encode())
    assert wants_offsets_topic(body(12, None), 12)
    assert wants_offsets_topic(body(4, [MetadataRequest.MetadataRequestTopic(version=4, name=TOPIC)]), 4)
    assert not wants_offsets_topic(body(4, [MetadataRequest.MetadataRequestTopic(version=4, name="t")]), 4)
    assert not wants_offsets_topic(body(4, []), 4)
