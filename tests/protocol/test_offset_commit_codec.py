"""The hand-written OffsetCommit codecs against kafka-python, over generated messages:
a decoded request holds every attribute kafka-python's decoder sets, a built response
every attribute kafka-python's constructor sets, response frames are byte-identical,
and a malformed body is still judged exactly as kafka-python's path judges it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from protocol import offset_commit_codec
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import MalformedRequest, decode_request, encode_response
from tests.support.codec_oracle import (
    attributes,
    check_damaged_decode,
    check_fast_decode,
    damaged,
    generic_decode,
)

REQUEST_VERSIONS = st.integers(offset_commit_codec.MIN_REQUEST_VERSION, offset_commit_codec.MAX_REQUEST_VERSION)
TEXT = st.text(max_size=200)       # past 127 bytes a compact length takes two varint bytes
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

_RequestTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_RequestPartition = _RequestTopic.OffsetCommitRequestPartition
_ResponseTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_ResponsePartition = _ResponseTopic.OffsetCommitResponsePartition


@st.composite
def requests(draw):
    version = draw(REQUEST_VERSIONS)
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        partitions = [
            _RequestPartition(partition_index=draw(INT32), committed_offset=draw(INT64),
                              committed_leader_epoch=draw(INT32), commit_timestamp=draw(INT64),
                              committed_metadata=draw(st.none() | st.just("") | TEXT))
            for _ in range(draw(st.integers(0, 6)))]
        named = {"topic_id": draw(st.uuids())} if version >= offset_commit_codec.TOPIC_IDS_SINCE else {"name": draw(TEXT)}
        topics.append(_RequestTopic(**named, partitions=partitions))
    return OffsetCommitRequest(
        version=version, group_id=draw(TEXT), generation_id_or_member_epoch=draw(INT32),
        member_id=draw(TEXT), group_instance_id=draw(st.none() | TEXT), retention_time_ms=draw(INT64),
        topics=topics)


@settings(max_examples=400, deadline=None)
@given(requests())
def test_a_decoded_request_is_what_kafka_python_decodes(request):
    check_fast_decode(ApiKey.OffsetCommit, offset_commit_codec.decode_offset_commit_request, request)


@settings(max_examples=400, deadline=None)
@given(requests(), st.data())
def test_a_damaged_request_is_judged_as_kafka_python_judges_it(request, data):
    check_damaged_decode(ApiKey.OffsetCommit, offset_commit_codec.decode_offset_commit_request, request.version, damaged(bytes(request.encode()), data))


@pytest.mark.parametrize("version", [0, 1, 2, 7, 8, 9])
def test_a_null_group_id_is_refused_as_before(version):
    request = OffsetCommitRequest(version=version, group_id="g", generation_id_or_member_epoch=1, member_id="m",
                                  group_instance_id=None, retention_time_ms=-1, topics=[])
    body = bytes(request.encode())
    body = (b"\x00" + body[2:]) if version >= 8 else (b"\xff\xff" + body[3:])   # "g" becomes null
    assert offset_commit_codec.decode_offset_commit_request(version, memoryview(body)) is None
    with pytest.raises(MalformedRequest, match="non-nullable field OffsetCommitRequest.GroupId"):
        decode_request(ApiKey.OffsetCommit, version, body)


ANSWERS = st.lists(st.tuples(st.tuples(TEXT, st.uuids()),
                             st.lists(st.tuples(INT32, st.sampled_from([int(e) for e in ErrorCode])), max_size=6)),
                   max_size=3)


def _named(version: int, name_and_id) -> dict:
    name, topic_id = name_and_id
    return {"topic_id": topic_id} if version >= offset_commit_codec.TOPIC_IDS_SINCE else {"name": name}


def _kafka_python_response(version: int, answers) -> OffsetCommitResponse:
    """What the commit handler built with kafka-python's constructors before."""
    topics = []
    for name, partitions in answers:
        kw = _named(version, name)
        topics.append(_ResponseTopic(**kw, partitions=[
            _ResponsePartition(partition_index=index, error_code=error) for index, error in partitions]))
    return OffsetCommitResponse(version=version, topics=topics)


def _request_for(version: int, answers) -> OffsetCommitRequest:
    return OffsetCommitRequest(version=version, group_id="g", topics=[
        _RequestTopic(**_named(version, name), partitions=[_RequestPartition(partition_index=index) for index, _ in parts])
        for name, parts in answers])


@settings(max_examples=300, deadline=None)
@given(st.integers(0, OffsetCommitResponse.max_version), ANSWERS)
def test_a_built_response_is_what_kafka_python_builds(version, answers):
    errors = {}
    for t_index, (_, parts) in enumerate(answers):
        for index, error in parts:
            errors.setdefault((t_index, index), error)
    # A partition listed twice answers the first error given for it, as the handler did.
    expected_answers = [(name, [(index, errors[t_index, index]) for index, _ in parts])
                        for t_index, (name, parts) in enumerate(answers)]
    built = offset_commit_codec.offset_commit_response(version, _request_for(version, answers), errors)
    assert attributes(built) == attributes(_kafka_python_response(version, expected_answers))
    no_errors = offset_commit_codec.offset_commit_response(version, _request_for(version, answers))
    assert all(p.error_code == 0 for topic in no_errors.topics for p in topic.partitions)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, offset_commit_codec.MAX_RESPONSE_VERSION), INT32, ANSWERS, st.booleans())
def test_a_response_frame_is_byte_identical_to_kafka_python(version, correlation_id, answers, built_bare):
    header = RequestHeader(ApiKey.OffsetCommit, version, correlation_id, "c", 0)
    response = _kafka_python_response(version, answers)
    if built_bare:
        response = OffsetCommitResponse(topics=response.topics)
    body = bytes(_kafka_python_response(version, answers).encode())
    header_bytes = correlation_id.to_bytes(4, "big", signed=True) + (b"\x00" if version >= 8 else b"")
    expected = (len(header_bytes) + len(body)).to_bytes(4, "big") + header_bytes + body
    assert offset_commit_codec.offset_commit_response_frame(correlation_id, version, response) == expected
    assert encode_response(header, response, version) == expected


@pytest.mark.parametrize("version", [0, 1])
def test_versions_kafka_4_removed_decode_as_kafka_python_decodes_them(version):
    """v0 has no generation or member (they read as the schema's -1 and ""); v1 carries a
    commit timestamp per partition."""
    partitions = [_RequestPartition(partition_index=0, committed_offset=5, commit_timestamp=1_700_000_000_000,
                                    committed_metadata="m"),
                  _RequestPartition(partition_index=3, committed_offset=9, committed_metadata=None)]
    request = OffsetCommitRequest(version=version, group_id="g", generation_id_or_member_epoch=4, member_id="m-1",
                                  topics=[_RequestTopic(name="t", partitions=partitions)])
    body = bytes(request.encode())
    fast = offset_commit_codec.decode_offset_commit_request(version, memoryview(body))
    assert generic_decode(ApiKey.OffsetCommit, version, body) == ("ok", attributes(fast))
    got = [(p.partition_index, p.committed_offset, p.commit_timestamp, p.committed_metadata)
           for p in fast.topics[0].partitions]
    if version == 0:
        assert (fast.generation_id_or_member_epoch, fast.member_id) == (-1, "")
        assert got == [(0, 5, -1, "m"), (3, 9, -1, None)]
    else:
        assert (fast.generation_id_or_member_epoch, fast.member_id) == (4, "m-1")
        assert got == [(0, 5, 1_700_000_000_000, "m"), (3, 9, -1, None)]


def test_responses_it_does_not_cover_are_left_to_kafka_python():
    tagged = OffsetCommitResponse(version=8, topics=[], _99=b"x")
    assert offset_commit_codec.offset_commit_response_frame(1, 8, tagged) is None
    # a v10 topic id kafka-python accepts as text but that is no UUID object
    by_text_id = _kafka_python_response(10, [(("t", "00000000-0000-0000-0000-000000000001"), [(0, 0)])])
    assert offset_commit_codec.offset_commit_response_frame(1, 10, by_text_id) is None
    header = RequestHeader(ApiKey.OffsetCommit, 10, 1, "c", 0)
    assert encode_response(header, by_text_id, 10)[8:] == b"\x00" + bytes(by_text_id.encode())
