"""The hand-written Heartbeat codecs against kafka-python, byte for byte, over generated
messages: every version they handle, both directions, and every malformed body still
judged exactly as kafka-python's path judges it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

from protocol import heartbeat_codec
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import MalformedRequest, decode_request, encode_response
from tests.support.codec_oracle import attributes, damaged, generic_decode

VERSIONS = st.integers(0, HeartbeatRequest.max_version)
TEXT = st.text(max_size=300)       # past 127 bytes a compact length takes two varint bytes
INT32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def requests(draw):
    version = draw(VERSIONS)
    instance = draw(st.none() | TEXT) if version >= 3 else None
    return HeartbeatRequest(version=version, group_id=draw(TEXT), generation_id=draw(INT32),
                            member_id=draw(TEXT), group_instance_id=instance)


@settings(max_examples=400, deadline=None)
@given(requests())
def test_a_decoded_request_is_what_kafka_python_decodes(request):
    body = bytes(request.encode())
    fast = heartbeat_codec.decode_heartbeat_request(request.version, memoryview(body))
    assert fast is not None, "a well-formed request takes the fast path"
    assert attributes(fast) == generic_decode(ApiKey.Heartbeat, request.version, body)[1]
    assert fast == request
    assert bytes(fast.encode()) == body


@settings(max_examples=400, deadline=None)
@given(requests(), st.data())
def test_a_damaged_request_is_judged_as_kafka_python_judges_it(request, data):
    body = damaged(bytes(request.encode()), data)
    fast = heartbeat_codec.decode_heartbeat_request(request.version, memoryview(body))
    expected = generic_decode(ApiKey.Heartbeat, request.version, body)
    if fast is None:
        return      # decode_request defers to kafka-python: nothing to compare
    assert expected == ("ok", attributes(fast))
    with_fast = decode_request(ApiKey.Heartbeat, request.version, body)
    assert attributes(with_fast) == expected[1]


@pytest.mark.parametrize("version", [0, 3, 4])
def test_a_null_group_id_is_refused_as_before(version):
    body = b"\xff\xff" + b"\x00" * 8 if version < 4 else b"\x00\x00\x00\x00\x00\x01\x01\x00"
    assert heartbeat_codec.decode_heartbeat_request(version, memoryview(body)) is None
    with pytest.raises(MalformedRequest, match="non-nullable field HeartbeatRequest.GroupId"):
        decode_request(ApiKey.Heartbeat, version, body)


@settings(max_examples=300, deadline=None)
@given(VERSIONS, INT32, st.sampled_from(list(ErrorCode)), st.integers(0, 2**31 - 1), st.booleans())
def test_a_response_frame_is_byte_identical_to_kafka_python(version, correlation_id, error, throttle, built_bare):
    header = RequestHeader(ApiKey.Heartbeat, version, correlation_id, "c", 0)
    if built_bare:
        response = HeartbeatResponse(throttle_time_ms=throttle, error_code=error)
    else:
        response = HeartbeatResponse(version=version, throttle_time_ms=throttle, error_code=error)
    body = bytes(HeartbeatResponse(version=version, throttle_time_ms=throttle, error_code=error).encode())
    header_bytes = correlation_id.to_bytes(4, "big", signed=True) + (b"\x00" if version >= 4 else b"")
    expected = (len(header_bytes) + len(body)).to_bytes(4, "big") + header_bytes + body
    assert heartbeat_codec.heartbeat_response_frame(correlation_id, version, response) == expected
    assert encode_response(header, response, version) == expected


def test_a_response_with_tagged_fields_is_left_to_kafka_python():
    response = HeartbeatResponse(version=4, throttle_time_ms=0, error_code=0, _99=b"x")
    assert response.unknown_tags
    assert heartbeat_codec.heartbeat_response_frame(1, 4, response) is None
