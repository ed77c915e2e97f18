import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader as KafkaPythonRequestHeader
from kafka.protocol.api_key import ApiKey

from protocol.api_keys import is_flexible
from protocol.headers import HeaderError, RequestHeader, parse_request_header

KNOWN_KEYS = [key for key in ApiKey if is_flexible(key, 0) is not None]
UNKNOWN_KEY = 999


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _v1(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    client = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, correlation_id) + client


@given(api_key=st.sampled_from(KNOWN_KEYS), version=st.integers(0, 20),
       correlation_id=st.integers(-(2**31), 2**31 - 1),
       client_id=st.none() | st.text(max_size=40), body=st.binary(max_size=20))
def test_parses_kafka_pythons_header_encoding_byte_for_byte(api_key, version, correlation_id, client_id, body):
    flexible = is_flexible(api_key, version)
    theirs = KafkaPythonRequestHeader(request_api_key=api_key, request_api_version=version,
                                      correlation_id=correlation_id, client_id=client_id)
    encoded = bytes(theirs.encode(flexible=flexible))

    header = parse_request_header(encoded + body)

    assert header == RequestHeader(api_key, version, correlation_id, client_id, len(encoded))
    decoded = KafkaPythonRequestHeader.decode(io.BytesIO(encoded), flexible=flexible)
    assert (decoded.request_api_key, decoded.request_api_version, decoded.correlation_id, decoded.client_id) == (
        header.api_key, header.api_version, header.correlation_id, header.client_id)


@given(tags=st.lists(st.tuples(st.integers(0, 2**31), st.binary(max_size=200)), max_size=5))
def test_v2_header_skips_tagged_fields_of_any_size(tags):
    tagged = _uvarint(len(tags)) + b"".join(_uvarint(tag) + _uvarint(len(data)) + data for tag, data in tags)
    payload = _v1(ApiKey.JoinGroup, 6, 1, b"cli") + tagged + b"BODY"

    header = parse_request_header(payload)

    assert payload[header.header_len:] == b"BODY"


def test_client_id_keeps_the_int16_length_in_v2():
    payload = _v1(ApiKey.Heartbeat, 4, 9, b"x" * 200) + b"\x00"
    header = parse_request_header(payload)
    assert header.client_id == "x" * 200
    assert header.header_len == len(payload)


def test_non_flexible_version_has_no_tagged_fields():
    payload = _v1(ApiKey.Heartbeat, 3, 9, b"c") + b"\x00BODY"
    assert parse_request_header(payload).header_len == len(payload) - 5


def test_api_versions_above_our_range_is_read_with_header_v2():
    # KIP-511: a newer client sends its newest ApiVersions, flexible, with header v2
    payload = _v1(ApiKey.ApiVersions, 7, 3, b"future") + b"\x00"
    header = parse_request_header(payload)
    assert (header.api_version, header.header_len) == (7, len(payload))


def test_unknown_api_key_reads_only_the_v1_part():
    payload = _v1(UNKNOWN_KEY, 0, 5, b"cli") + b"\x00rest"
    header = parse_request_header(payload)
    assert (header.api_key, header.correlation_id, header.client_id) == (UNKNOWN_KEY, 5, "cli")
    assert header.header_len == len(payload) - 5


def test_null_client_id():
    assert parse_request_header(_v1(ApiKey.Metadata, 1, 5, None)).client_id is None


@pytest.mark.parametrize("payload, reason", [
    (b"", "at least 10 bytes"),
    (struct.pack(">hhi", 12, 4, 1) + b"\x00", "at least 10 bytes"),
    (struct.pack(">hhih", 12, 3, 1, 5) + b"abc", "runs past"),
    (struct.pack(">hhih", 12, 3, 1, -2), "invalid length -2"),
    (struct.pack(">hhih", 12, 3, 1, 2) + b"\xff\xfe", "not UTF-8"),
    (struct.pack(">hhih", 12, 4, 1, 0), "varint runs past"),
    (struct.pack(">hhih", 12, 4, 1, 0) + b"\x01\x00\x05ab", "tagged field of 5 bytes"),
    (struct.pack(">hhih", 12, 4, 1, 0) + b"\xff\xff\xff\xff\xff\x01", "longer than 32 bits"),
])
def test_unreadable_headers_raise_with_a_reason(payload, reason):
    with pytest.raises(HeaderError, match=reason):
        parse_request_header(payload)
