"""Hand-written codecs for the hottest message: Heartbeat (API 12, v0-4).

The profile (docs/benchmarks/notes.md, "Heartbeat request path") showed kafka-python's generic
decode and response encode as a large share of a heartbeat's CPU; these do the same
with one struct call each.

Both cover only the well-formed common case and answer None for anything else (a null or
negative length, a body that is short or has trailing bytes, tagged fields, bytes that
are not UTF-8), so `protocol.messages` falls back to kafka-python, which then refuses or
logs exactly as it always has. What they build is what kafka-python builds: the same
`HeartbeatRequest` with the same attributes set, and byte-identical frames
(tests/protocol/test_heartbeat_codec.py checks both over generated messages).

    Heartbeat request  v0-2: group_id string, generation_id int32, member_id string
                       v3:   + group_instance_id nullable string
                       v4:   the same fields, flexible (compact strings, tagged fields)
    Heartbeat response v0:   error_code int16
                       v1-3: throttle_time_ms int32, error_code int16
                       v4:   the same, flexible (response header v1, tagged fields)
"""

from __future__ import annotations

import struct

from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

from protocol.bare import bare

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_FRAME_V0 = struct.Struct(">iih")           # size, correlation id, error_code
_FRAME_V1 = struct.Struct(">iiih")          # size, correlation id, throttle_time_ms, error_code
_FRAME_V4 = struct.Struct(">iiBihB")        # size, correlation id, header tags, throttle, error, body tags


def decode_heartbeat_request(version: int, data: memoryview) -> HeartbeatRequest | None:
    """The request, or None when kafka-python must decide (see the module docstring)."""
    try:
        if version >= 4:
            return _decode_flexible(version, data)
        return _decode_classic(version, data)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None


def _decode_classic(version: int, data: memoryview) -> HeartbeatRequest | None:
    end = len(data)
    size = _INT16.unpack_from(data, 0)[0]
    if size < 0 or 2 + size + 6 > end:
        return None
    group_id = str(data[2:2 + size], "utf-8")
    pos = 2 + size
    generation_id = _INT32.unpack_from(data, pos)[0]
    size = _INT16.unpack_from(data, pos + 4)[0]
    pos += 6
    if size < 0 or pos + size > end:
        return None
    member_id = str(data[pos:pos + size], "utf-8")
    pos += size
    instance_id = None
    if version >= 3:
        size = _INT16.unpack_from(data, pos)[0]
        pos += 2
        if size >= 0:
            if pos + size > end:
                return None
            instance_id = str(data[pos:pos + size], "utf-8")
            pos += size
        elif size != -1:
            return None
    if pos != end:
        return None
    return _request(version, group_id, generation_id, member_id, instance_id)


def _decode_flexible(version: int, data: memoryview) -> HeartbeatRequest | None:
    end = len(data)
    size, pos = _uvarint(data, 0)
    if size == 0 or pos + size - 1 + 4 > end:
        return None
    group_id = str(data[pos:pos + size - 1], "utf-8")
    pos += size - 1
    generation_id = _INT32.unpack_from(data, pos)[0]
    size, pos = _uvarint(data, pos + 4)
    if size == 0 or pos + size - 1 > end:
        return None
    member_id = str(data[pos:pos + size - 1], "utf-8")
    pos += size - 1
    size, pos = _uvarint(data, pos)
    instance_id = None
    if size:
        if pos + size - 1 > end:
            return None
        instance_id = str(data[pos:pos + size - 1], "utf-8")
        pos += size - 1
    if pos + 1 != end or data[pos] != 0:     # anything but an empty tagged-field section
        return None
    return _request(version, group_id, generation_id, member_id, instance_id)


def _uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:     # a string under 127 bytes: one byte, nearly always
        return byte, pos + 1
    value, shift = 0, 0
    while byte & 0x80:
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift > 28:
            raise IndexError("varint longer than 32 bits")
        pos += 1
        byte = data[pos]
    return value | (byte << shift), pos + 1


def _request(version: int, group_id: str, generation_id: int, member_id: str,
             instance_id: str | None) -> HeartbeatRequest:
    # The attributes kafka-python's decoder sets, without its per-field __init__ loop.
    request = bare(HeartbeatRequest, version)
    request.group_id = group_id
    request.generation_id = generation_id
    request.member_id = member_id
    if version >= 3:
        request.group_instance_id = instance_id
    return request


def heartbeat_response_frame(correlation_id: int, version: int, response: HeartbeatResponse) -> bytes | None:
    """The whole response frame, or None when kafka-python must encode it (tagged fields)."""
    if response.tags or response.unknown_tags:
        return None
    if version >= 4:
        return _FRAME_V4.pack(_FRAME_V4.size - 4, correlation_id, 0, response.throttle_time_ms,
                              response.error_code, 0)
    if version >= 1:
        return _FRAME_V1.pack(_FRAME_V1.size - 4, correlation_id, response.throttle_time_ms, response.error_code)
    return _FRAME_V0.pack(_FRAME_V0.size - 4, correlation_id, response.error_code)
