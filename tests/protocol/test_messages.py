import struct

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest

from protocol.api_keys import LOCAL_VERSIONS
from protocol.headers import RequestHeader
from protocol.messages import MalformedRequest, decode_request, encode_response, request_class, response_class
from protocol.offset_commit_codec import offset_commit_response
from tests.support.protocol_samples import sample_request, sample_response, served_versions

SERVED = served_versions()
CORRELATION_ID = 0x5EED


def _ids(case):
    api_key, version = case
    return f"{ApiKey(api_key).name}-v{version}"


def _header(api_key, version):
    return RequestHeader(api_key, version, CORRELATION_ID, "tests", 0)


def test_every_local_api_has_request_and_response_codecs_for_every_served_version():
    for api_key, (_low, high) in LOCAL_VERSIONS.items():
        assert request_class(api_key).API_KEY == api_key
        assert response_class(api_key).API_KEY == api_key
        assert high <= request_class(api_key).max_version
        assert high <= response_class(api_key).max_version


@pytest.mark.parametrize("case", SERVED, ids=_ids)
def test_request_round_trips(case):
    api_key, version = case
    request = sample_request(api_key, version)
    body = bytes(request.encode())

    decoded = decode_request(api_key, version, body)

    assert decoded.version == version
    assert decoded.to_dict() == request.to_dict()
    assert bytes(decoded.encode()) == body


@pytest.mark.parametrize("case", SERVED, ids=_ids)
def test_response_frame_round_trips_through_kafka_python(case):
    api_key, version = case
    response = sample_response(api_key, version)

    frame = encode_response(_header(api_key, version), response, version)

    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    decoded = response_class(api_key).decode(frame, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == CORRELATION_ID
    assert decoded.to_dict() == response.to_dict()
    # kafka-python's own framing of the same object must give the same bytes
    assert bytes(decoded.encode(header=True, framed=True)) == frame


@pytest.mark.parametrize("case", SERVED, ids=_ids)
def test_response_header_is_v1_exactly_for_flexible_versions_except_api_versions(case):
    api_key, version = case
    response = sample_response(api_key, version)
    body = bytes(response.encode())

    frame = encode_response(_header(api_key, version), response, version)

    header = frame[4:len(frame) - len(body)]
    flexible = response_class(api_key).flexible_version_q(version)
    if flexible and api_key != ApiKey.ApiVersions:
        assert header == struct.pack(">i", CORRELATION_ID) + b"\x00"
    else:
        assert header == struct.pack(">i", CORRELATION_ID)


def test_api_versions_v3_response_keeps_header_v0():
    frame = encode_response(_header(ApiKey.ApiVersions, 3), sample_response(ApiKey.ApiVersions, 3), 3)

    # body starts right after the correlation id: error_code int16 = 0, then a compact array
    assert frame[4:8] == struct.pack(">i", CORRELATION_ID)
    assert frame[8:10] == b"\x00\x00"


def test_encode_response_refuses_a_response_built_at_another_version():
    response = sample_response(ApiKey.Heartbeat, 3)
    with pytest.raises(ValueError, match="v3, not v4"):
        encode_response(_header(ApiKey.Heartbeat, 4), response, 4)


def test_encode_response_refuses_a_response_of_another_api():
    with pytest.raises(ValueError, match="does not answer"):
        encode_response(_header(ApiKey.SyncGroup, 3), sample_response(ApiKey.Heartbeat, 3), 3)


def test_encode_response_encodes_a_response_built_without_version_at_the_given_version():
    response = response_class(ApiKey.Heartbeat)(throttle_time_ms=0, error_code=27)
    frame = encode_response(_header(ApiKey.Heartbeat, 4), response, 4)
    assert frame == struct.pack(">iib", 4 + 1 + 7, CORRELATION_ID, 0) + struct.pack(">ihb", 0, 27, 0)


@pytest.mark.parametrize("case", SERVED, ids=_ids)
def test_every_truncation_of_a_request_is_malformed(case):
    api_key, version = case
    body = bytes(sample_request(api_key, version).encode())
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            decode_request(api_key, version, body[:cut])


def test_trailing_bytes_are_ignored_as_kafka_does(caplog):
    request = sample_request(ApiKey.Heartbeat, 4)
    body = bytes(request.encode())

    with caplog.at_level("DEBUG", logger="protocol.messages"):
        decoded = decode_request(ApiKey.Heartbeat, 4, body + b"\x00junk")

    assert decoded.to_dict() == request.to_dict()
    assert "ignoring 5 trailing bytes" in caplog.text


def _string(value: bytes | None) -> bytes:
    return struct.pack(">h", -1) if value is None else struct.pack(">h", len(value)) + value


def test_null_in_a_non_nullable_string_is_malformed():
    body = _string(None) + struct.pack(">i", 3) + _string(b"member")
    with pytest.raises(MalformedRequest, match="non-nullable field HeartbeatRequest.GroupId"):
        decode_request(ApiKey.Heartbeat, 0, body)


def test_null_in_a_nullable_string_is_accepted():
    body = _string(b"g") + struct.pack(">i", 3) + _string(b"m") + _string(None)
    assert decode_request(ApiKey.Heartbeat, 3, body).group_instance_id is None


def test_null_inside_a_nested_struct_is_malformed():
    body = (_string(b"g") + struct.pack(">i", 1000) + _string(b"") + _string(b"consumer")
            + struct.pack(">i", 1) + _string(None) + struct.pack(">i", 0))
    with pytest.raises(MalformedRequest, match="JoinGroupRequest.Protocols.Name"):
        decode_request(ApiKey.JoinGroup, 0, body)


def test_null_array_where_the_version_does_not_allow_it_is_malformed():
    # OffsetFetch topics may be null ("all partitions") from v2 only
    body = _string(b"g") + struct.pack(">i", -1)
    with pytest.raises(MalformedRequest, match="OffsetFetchRequest.Topics"):
        decode_request(ApiKey.OffsetFetch, 1, body)
    assert decode_request(ApiKey.OffsetFetch, 2, body).topics is None


def test_null_element_in_a_string_array_is_malformed():
    body = struct.pack(">i", 2) + _string(b"orders") + _string(None)
    with pytest.raises(MalformedRequest, match="element of DescribeGroupsRequest.Groups"):
        decode_request(ApiKey.DescribeGroups, 0, body)


def test_invalid_utf8_is_malformed():
    body = _string(b"\xff\xfe") + struct.pack(">i", 3) + _string(b"m")
    with pytest.raises(MalformedRequest, match="UnicodeDecodeError"):
        decode_request(ApiKey.Heartbeat, 0, body)


def test_string_longer_than_the_body_is_malformed_even_at_the_end():
    # kafka-python would silently return "m" for a member_id announced as 10 bytes
    body = _string(b"g") + struct.pack(">i", 1) + struct.pack(">h", 10) + b"m"
    with pytest.raises(MalformedRequest, match="truncated"):
        decode_request(ApiKey.Heartbeat, 0, body)


def test_huge_array_count_fails_fast_without_allocating():
    body = _string(b"g") + struct.pack(">i", 1000) + _string(b"") + _string(b"consumer") + struct.pack(">i", 2**31 - 1)
    with pytest.raises(MalformedRequest):
        decode_request(ApiKey.JoinGroup, 0, body)


def test_huge_compact_array_count_fails_fast():
    # DescribeGroups v5: compact array with count 2**32 - 2
    with pytest.raises(MalformedRequest):
        decode_request(ApiKey.DescribeGroups, 5, b"\xff\xff\xff\xff\x0f")


def test_unknown_api_key_is_malformed():
    with pytest.raises(MalformedRequest, match="no codec for api key 0"):
        decode_request(ApiKey.Produce, 9, b"")


def test_version_beyond_the_codec_is_malformed():
    with pytest.raises(MalformedRequest, match="outside the codec"):
        decode_request(ApiKey.Heartbeat, 99, b"")


def test_a_request_built_by_kafka_python_for_a_client_decodes_the_same():
    request = JoinGroupRequest(version=5, group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=300_000,
                               member_id="", group_instance_id=None, protocol_type="consumer", protocols=[])
    decoded = decode_request(ApiKey.JoinGroup, 5, bytes(request.encode()))
    assert decoded.group_id == "g"
    assert decoded.protocols == []


def test_request_and_response_class_lookups_name_the_unknown_key():
    with pytest.raises(KeyError, match="api key 0"):
        request_class(ApiKey.Produce)
    with pytest.raises(KeyError, match="api key 0"):
        response_class(ApiKey.Produce)
    assert request_class(ApiKey.Heartbeat) is HeartbeatRequest


# OffsetCommit v10 (Kafka 4.1+ OffsetCommitRequest.json / OffsetCommitResponse.json): the
# topic name gives way to a 16-byte topic id; everything else as v9. Bytes laid out by hand.
_TOPIC_ID = bytes(range(1, 17))


def test_offset_commit_v10_request_names_its_topic_by_id_as_kafkas_schema_says():
    body = (b"\x02g" + struct.pack(">i", 3) + b"\x02m" + b"\x00"     # group, epoch, member, null instance
            + b"\x02" + _TOPIC_ID                                      # one topic, by id
            + b"\x02" + struct.pack(">iqi", 2, 5, -1) + b"\x01" + b"\x00"  # one partition, "" metadata
            + b"\x00" + b"\x00")                                       # topic and request tags
    request = decode_request(ApiKey.OffsetCommit, 10, body)
    topic = request.topics[0]
    assert (request.group_id, request.generation_id_or_member_epoch, request.member_id) == ("g", 3, "m")
    assert topic.topic_id.bytes == _TOPIC_ID and topic.name == ""
    assert [(p.partition_index, p.committed_offset) for p in topic.partitions] == [(2, 5)]


def test_offset_commit_v10_response_answers_by_topic_id_as_kafkas_schema_says():
    request = decode_request(ApiKey.OffsetCommit, 10, b"\x02g" + struct.pack(">i", 3) + b"\x02m\x00\x02" + _TOPIC_ID
                             + b"\x02" + struct.pack(">iqi", 2, 5, -1) + b"\x01\x00\x00\x00")
    frame = encode_response(_header(ApiKey.OffsetCommit, 10), offset_commit_response(10, request, {(0, 2): 100}), 10)
    assert frame[8:] == (b"\x00" + struct.pack(">i", 0) + b"\x02" + _TOPIC_ID     # header tags, throttle, topic id
                         + b"\x02" + struct.pack(">ih", 2, 100) + b"\x00\x00\x00")


def test_offset_fetch_v10_names_topics_by_id_both_ways_as_kafkas_schema_says():
    body = (b"\x02\x02g" + b"\x02a" + struct.pack(">i", 4)                # one group "g", member "a", epoch 4
            + b"\x02" + _TOPIC_ID + b"\x02" + struct.pack(">i", 1) + b"\x00"  # one topic by id: partition 1
            + b"\x00" + b"\x00" + b"\x00")                                # group tags, require_stable, tags
    group = decode_request(ApiKey.OffsetFetch, 10, body).groups[0]
    assert (group.group_id, group.member_id, group.member_epoch) == ("g", "a", 4)
    assert group.topics[0].topic_id.bytes == _TOPIC_ID and group.topics[0].partition_indexes == [1]
    cls = response_class(ApiKey.OffsetFetch)
    topic_cls = cls.OffsetFetchResponseGroup.OffsetFetchResponseTopics
    response = cls(version=10, throttle_time_ms=0, groups=[cls.OffsetFetchResponseGroup(
        version=10, group_id="g", error_code=0, topics=[topic_cls(
            version=10, name="t", topic_id=group.topics[0].topic_id, partitions=[topic_cls.OffsetFetchResponsePartitions(
                version=10, partition_index=1, committed_offset=7, committed_leader_epoch=-1, metadata="",
                error_code=0)])])])
    assert encode_response(_header(ApiKey.OffsetFetch, 10), response, 10)[8:] == (
        b"\x00" + struct.pack(">i", 0) + b"\x02\x02g" + b"\x02" + _TOPIC_ID
        + b"\x02" + struct.pack(">iqi", 1, 7, -1) + b"\x01" + struct.pack(">h", 0) + b"\x00"
        + b"\x00" + struct.pack(">h", 0) + b"\x00" + b"\x00")
