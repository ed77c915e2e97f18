"""The hand-written OffsetFetch v0-7 codecs against kafka-python, over generated
messages: a decoded request holds every attribute kafka-python's decoder sets and a
damaged one is judged as kafka-python judges it; a built response holds every attribute
kafka-python's constructor sets, frames are byte-identical to kafka-python's generic
path, and what it does not cover is left to kafka-python. Also the metrics' count of an
OffsetFetch's codes against their generic walk."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

from coordinator import metrics
from protocol import offset_fetch_codec
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import MalformedRequest, decode_request, encode_response
from protocol.topics_frame import OffsetColumns, PartitionTuples
from tests.support.codec_oracle import attributes, check_damaged_decode, check_fast_decode, damaged

VERSIONS = st.integers(0, offset_fetch_codec.MAX_RESPONSE_VERSION)
TEXT = st.text(max_size=200)       # past 126 bytes a compact length takes two varint bytes
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
CODES = st.sampled_from(list(ErrorCode)) | st.integers(-(2**15), 2**15 - 1)

_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = _Topic.OffsetFetchResponsePartition


@st.composite
def requests(draw):
    version = draw(VERSIONS)
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = [topic(name=draw(TEXT), partition_indexes=draw(st.lists(INT32, max_size=8)))
              for _ in range(draw(st.integers(0, 3)))]
    if version >= 2 and draw(st.booleans()):
        topics = None       # every topic the group has offsets for
    return OffsetFetchRequest(version=version, group_id=draw(TEXT), topics=topics,
                              require_stable=draw(st.booleans()))


@settings(max_examples=400, deadline=None)
@given(requests())
def test_a_decoded_request_is_what_kafka_python_decodes(request):
    check_fast_decode(ApiKey.OffsetFetch, offset_fetch_codec.decode_offset_fetch_request, request)


@settings(max_examples=400, deadline=None)
@given(requests(), st.data())
def test_a_damaged_request_is_judged_as_kafka_python_judges_it(request, data):
    check_damaged_decode(ApiKey.OffsetFetch, offset_fetch_codec.decode_offset_fetch_request, request.version, damaged(bytes(request.encode()), data))


@pytest.mark.parametrize("version", [0, 1, 2, 6, 7])
def test_a_null_group_id_is_refused_as_before(version):
    body = bytes(OffsetFetchRequest(version=version, group_id=None, topics=[]).encode())
    assert offset_fetch_codec.decode_offset_fetch_request(version, memoryview(body)) is None
    with pytest.raises(MalformedRequest, match="non-nullable field OffsetFetchRequest.GroupId"):
        decode_request(ApiKey.OffsetFetch, version, body)


@st.composite
def answers(draw):
    """[(name, [(partition_index, committed_offset, committed_leader_epoch, metadata, error_code)])],
    half the time with no metadata anywhere (the one-pack-per-topic path)."""
    metadata = st.just("") if draw(st.booleans()) else st.none() | st.just("") | TEXT
    return draw(st.lists(st.tuples(TEXT, st.lists(st.tuples(INT32, INT64, INT32, metadata, CODES), max_size=8)),
                         max_size=3))


@st.composite
def column_answers(draw):
    """The same answers as `OffsetColumns` (error codes NONE), each value a stored record's
    (offset, leader epoch, metadata, commit timestamp): [(name, columns, as tuples)]."""
    metadata = st.just("") if draw(st.booleans()) else st.none() | st.just("") | TEXT
    out = []
    for name, partitions in draw(st.lists(st.tuples(TEXT, st.lists(st.tuples(INT32, INT64, INT32, metadata),
                                                                   max_size=8)), max_size=3)):
        columns = OffsetColumns([p[0] for p in partitions], [(*p[1:], 12345) for p in partitions])
        out.append((name, columns, [(*p, 0) for p in partitions]))
    return out


def _kafka_python_response(version: int, topics, error_code: int = 0, bare: bool = False) -> OffsetFetchResponse:
    """What the OffsetFetch handler built with kafka-python's constructors before."""
    kw = {} if bare else {"version": version}
    return OffsetFetchResponse(**kw, throttle_time_ms=0, error_code=error_code, topics=[
        _Topic(**kw, name=name, partitions=[
            _Partition(**kw, partition_index=index, committed_offset=offset, committed_leader_epoch=epoch,
                       metadata=metadata, error_code=error) for index, offset, epoch, metadata, error in partitions])
        for name, partitions in topics])


def _expected_frame(correlation_id: int, version: int, topics, error_code: int = 0) -> bytes:
    body = bytes(_kafka_python_response(version, topics, error_code).encode())
    header = correlation_id.to_bytes(4, "big", signed=True) + (b"\x00" if version >= 6 else b"")
    return (len(header) + len(body)).to_bytes(4, "big") + header + body


@settings(max_examples=300, deadline=None)
@given(VERSIONS, answers(), CODES)
def test_a_built_response_is_what_kafka_python_builds(version, topics, error_code):
    built = offset_fetch_codec.offset_fetch_response(version, topics, error_code)
    assert all(type(t.partitions) is PartitionTuples for t in built.topics)    # packed as they are
    assert attributes(offset_fetch_codec.materialized(built)) == attributes(
        _kafka_python_response(version, topics, error_code))


@settings(max_examples=500, deadline=None)
@given(VERSIONS, INT32, answers(), CODES, st.sampled_from(["kafka-python", "bare kafka-python", "built"]))
def test_a_response_frame_is_byte_identical_to_kafka_python(version, correlation_id, topics, error_code, built_by):
    if built_by == "built":
        response = offset_fetch_codec.offset_fetch_response(version, topics, error_code)
    else:
        response = _kafka_python_response(version, topics, error_code, bare=built_by == "bare kafka-python")
    expected = _expected_frame(correlation_id, version, topics, error_code)
    assert offset_fetch_codec.offset_fetch_response_frame(correlation_id, version, response) == expected
    header = RequestHeader(ApiKey.OffsetFetch, version, correlation_id, "c", 0)
    assert encode_response(header, response, version) == expected


@settings(max_examples=500, deadline=None)
@given(VERSIONS, INT32, column_answers(), CODES)
def test_a_response_of_columns_is_byte_identical_to_kafka_python(version, correlation_id, answers, error_code):
    response = offset_fetch_codec.offset_fetch_response(version, [(name, cols) for name, cols, _ in answers],
                                                        error_code)
    assert all(isinstance(t.partitions, OffsetColumns) for t in response.topics)    # packed as they are
    tuples = [(name, rows) for name, _, rows in answers]
    expected = _expected_frame(correlation_id, version, tuples, error_code)
    assert offset_fetch_codec.offset_fetch_response_frame(correlation_id, version, response) == expected
    header = RequestHeader(ApiKey.OffsetFetch, version, correlation_id, "c", 0)
    assert encode_response(header, response, version) == expected
    assert attributes(offset_fetch_codec.materialized(response)) == attributes(
        _kafka_python_response(version, tuples, error_code))


@pytest.mark.parametrize("version", range(offset_fetch_codec.MAX_RESPONSE_VERSION + 1))
def test_a_thousand_partitions_without_metadata_take_one_pack_and_match(version):
    topics = [("t", [(i, 10 * i, 3, "", 0) for i in range(1000)]), ("u", [(0, -1, -1, "", ErrorCode.NONE)])]
    response = offset_fetch_codec.offset_fetch_response(version, topics)
    assert offset_fetch_codec.offset_fetch_response_frame(7, version, response) == _expected_frame(7, version, topics)


def test_responses_it_does_not_cover_are_left_to_kafka_python():
    frame = offset_fetch_codec.offset_fetch_response_frame
    tagged = OffsetFetchResponse(version=6, throttle_time_ms=0, error_code=0, topics=[], _99=b"x")
    assert frame(1, 6, tagged) is None
    header = RequestHeader(ApiKey.OffsetFetch, 6, 1, "c", 0)
    assert encode_response(header, tagged, 6)[8:] == b"\x00" + bytes(tagged.encode())
    tagged_partition = _kafka_python_response(7, [("t", [(0, 1, 2, "", 0)])])
    tagged_partition.topics[0].partitions[0].unknown_tags = {"_9": b"x"}
    assert frame(1, 7, tagged_partition) is None
    several_groups = OffsetFetchResponse(version=8, throttle_time_ms=0, groups=[])
    assert frame(1, 8, several_groups) is None
    header = RequestHeader(ApiKey.OffsetFetch, 8, 1, "c", 0)
    assert encode_response(header, several_groups, 8)[8:] == b"\x00" + bytes(several_groups.encode())


@pytest.mark.parametrize("version", [1, 5, 7])
@pytest.mark.parametrize("field, value", [("committed_offset", 2**63), ("error_code", 2**15),
                                          ("metadata", b"bytes"), ("partition_index", None)])
def test_values_kafka_python_refuses_are_left_to_it(version, field, value):
    response = _kafka_python_response(version, [("t", [(0, 1, 2, "", 0), (1, 1, 2, "m", 0)])])
    for partition in response.topics[0].partitions:
        setattr(partition, field, value)
    assert offset_fetch_codec.offset_fetch_response_frame(1, version, response) is None
    header = RequestHeader(ApiKey.OffsetFetch, version, 1, "c", 0)
    try:
        expected = _expected_frame_of(response, version)
    except Exception as exc:
        with pytest.raises(type(exc)):
            encode_response(header, response, version)
    else:
        assert encode_response(header, response, version) == expected


@pytest.mark.parametrize("version", [1, 5, 7])
@pytest.mark.parametrize("partition", [(0, 2**63, 2, "", 0), (0, 1, 2, "", 2**15), (0, 1, 2, b"bytes", 0),
                                       (None, 1, 2, "m", 0)])
def test_a_built_answer_kafka_python_refuses_is_left_to_it_as_objects(version, partition):
    """A value the hand codec cannot pack sends a built answer (partition tuples) to
    kafka-python's encoder as its objects, which encodes or refuses it as it always has."""
    topics = [("t", [(1, 1, 2, "", 0), partition])]
    built = offset_fetch_codec.offset_fetch_response(version, topics)
    assert offset_fetch_codec.offset_fetch_response_frame(1, version, built) is None
    header = RequestHeader(ApiKey.OffsetFetch, version, 1, "c", 0)
    try:
        expected = _expected_frame_of(_kafka_python_response(version, topics), version)
    except Exception as exc:
        with pytest.raises(type(exc)):
            encode_response(header, built, version)
    else:
        assert encode_response(header, built, version) == expected


def _expected_frame_of(response: OffsetFetchResponse, version: int) -> bytes:
    body = bytes(response.encode())
    header = (1).to_bytes(4, "big") + (b"\x00" if version >= 6 else b"")
    return (len(header) + len(body)).to_bytes(4, "big") + header + body


@settings(max_examples=200, deadline=None)
@given(VERSIONS, answers(), column_answers(), CODES, st.sampled_from(["tuples", "columns", "kafka-python"]))
def test_the_metrics_count_an_answers_codes_as_the_generic_walk_does(version, topics, columns, error_code, built):
    if built == "columns":
        response = offset_fetch_codec.offset_fetch_response(version, [(n, c) for n, c, _ in columns], error_code)
    else:
        response = (offset_fetch_codec.offset_fetch_response(version, topics, error_code) if built == "tuples"
                    else _kafka_python_response(version, topics, error_code))
    counted = metrics.response_codes(ApiKey.OffsetFetch, version, response)
    walked: metrics.Tally[int] = metrics.Tally()
    for path in metrics._error_paths(OffsetFetchResponse, version):
        metrics._collect_codes(offset_fetch_codec.materialized(response), path, walked)
    assert counted == (walked, 0)


# ---- v8+ (KIP-709): several groups; v10 names topics by id

GROUP_VERSIONS = st.integers(offset_fetch_codec.GROUPS_SINCE, offset_fetch_codec.MAX_GROUPS_RESPONSE_VERSION)
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_GroupTopic = _Group.OffsetFetchResponseTopics
_GroupPartition = _GroupTopic.OffsetFetchResponsePartitions


@st.composite
def group_answers(draw):
    """[(group_id, error_code, [(name, topic_id, partitions as kgc hands them, as tuples)])]:
    each topic's partitions as `OffsetColumns` (codes NONE) or tuples."""
    groups = []
    for _ in range(draw(st.integers(0, 3))):
        topics = []
        if draw(st.booleans()):
            for name, columns, rows in draw(column_answers()):
                topics.append((name, draw(st.uuids()), columns, rows))
        else:
            for name, rows in draw(answers()):
                topics.append((name, draw(st.uuids()), rows, rows))
        groups.append((draw(TEXT), draw(CODES), topics))
    return groups


def _kafka_python_groups(version: int, groups) -> OffsetFetchResponse:
    return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=[
        _Group(version=version, group_id=group_id, error_code=code, topics=[
            _GroupTopic(version=version, name=name, topic_id=topic_id, partitions=[
                _GroupPartition(version=version, partition_index=index, committed_offset=offset,
                                committed_leader_epoch=epoch, metadata=metadata, error_code=error)
                for index, offset, epoch, metadata, error in rows])
            for name, topic_id, _, rows in topics])
        for group_id, code, topics in groups])


def _built_groups(version: int, groups) -> OffsetFetchResponse:
    built = offset_fetch_codec.offset_fetch_groups_response(version, [
        offset_fetch_codec.offset_fetch_group(version, group_id, code, [(name, given) for name, _, given, _ in topics])
        for group_id, code, topics in groups])
    for group, (_, _, topics) in zip(built.groups, groups, strict=True):
        for topic, (_, topic_id, _, _) in zip(group.topics, topics, strict=True):
            topic.topic_id = topic_id       # as the edge sets it (`net/topic_ids.py`)
    return built


@settings(max_examples=500, deadline=None)
@given(GROUP_VERSIONS, INT32, group_answers(), st.booleans())
def test_a_groups_response_frame_is_byte_identical_to_kafka_python(version, correlation_id, groups, built):
    response = _built_groups(version, groups) if built else _kafka_python_groups(version, groups)
    body = bytes(_kafka_python_groups(version, groups).encode())
    expected = (len(body) + 5).to_bytes(4, "big") + correlation_id.to_bytes(4, "big", signed=True) + b"\x00" + body
    assert offset_fetch_codec.offset_fetch_groups_response_frame(correlation_id, version, response) == expected
    header = RequestHeader(ApiKey.OffsetFetch, version, correlation_id, "c", 0)
    assert encode_response(header, response, version) == expected


@settings(max_examples=200, deadline=None)
@given(GROUP_VERSIONS, group_answers())
def test_a_built_groups_response_is_what_kafka_python_builds(version, groups):
    built = offset_fetch_codec.materialized(_built_groups(version, groups))
    assert attributes(built) == attributes(_kafka_python_groups(version, groups))


@settings(max_examples=200, deadline=None)
@given(GROUP_VERSIONS, group_answers(), st.booleans())
def test_the_metrics_count_a_groups_answers_codes_as_the_generic_walk_does(version, groups, built):
    response = _built_groups(version, groups) if built else _kafka_python_groups(version, groups)
    counted = metrics.response_codes(ApiKey.OffsetFetch, version, response)
    walked: metrics.Tally[int] = metrics.Tally()
    for path in metrics._error_paths(OffsetFetchResponse, version):
        metrics._collect_codes(offset_fetch_codec.materialized(response), path, walked)
    assert counted == (walked, 0)


def test_a_groups_answer_with_a_topic_of_no_known_id_is_left_to_kafka_python():
    """v10 without the id the edge sets: kafka-python encodes (or refuses) it, as before."""
    response = offset_fetch_codec.offset_fetch_groups_response(10, [
        offset_fetch_codec.offset_fetch_group(10, "g", 0, [("t", [(0, 1, 2, "", 0)])])])
    response.groups[0].topics[0].topic_id = None
    assert offset_fetch_codec.offset_fetch_groups_response_frame(1, 10, response) is None


@st.composite
def group_requests(draw):
    version = draw(GROUP_VERSIONS)
    group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
    topic_cls = group_cls.OffsetFetchRequestTopics
    groups = []
    for _ in range(draw(st.integers(0, 3))):
        topics = None if draw(st.booleans()) else [
            topic_cls(name=draw(TEXT), topic_id=draw(st.uuids()), partition_indexes=draw(st.lists(INT32, max_size=8)))
            for _ in range(draw(st.integers(0, 3)))]
        groups.append(group_cls(group_id=draw(TEXT), member_id=draw(st.none() | TEXT), member_epoch=draw(INT32),
                                topics=topics))
    return OffsetFetchRequest(version=version, groups=groups, require_stable=draw(st.booleans()))


@settings(max_examples=400, deadline=None)
@given(group_requests())
def test_a_decoded_groups_request_is_what_kafka_python_decodes(request):
    check_fast_decode(ApiKey.OffsetFetch, offset_fetch_codec.decode_offset_fetch_groups_request, request)


@settings(max_examples=400, deadline=None)
@given(group_requests(), st.data())
def test_a_damaged_groups_request_is_judged_as_kafka_python_judges_it(request, data):
    check_damaged_decode(ApiKey.OffsetFetch, offset_fetch_codec.decode_offset_fetch_groups_request, request.version,
                         damaged(bytes(request.encode()), data))
