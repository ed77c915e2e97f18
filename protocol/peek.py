"""The little an opaque forward needs to know about a request.

`peek_request` reads api key, version and correlation id from the first 8 bytes of a
payload (same layout in every request header version). `produce_expects_response`
answers the one question that changes the wire: Produce with acks=0 gets no response,
so the forwarder must not wait for one (Kafka `ProduceRequest`, kafka-python
`expect_response`).

Produce body layout up to acks:
    v0-2:  acks int16 first
    v3-8:  transactional_id nullable string (int16 length), then acks int16
    v9+:   transactional_id compact nullable string (uvarint length + 1), then acks int16
"""

from __future__ import annotations

import struct

from protocol.headers import HeaderError, parse_request_header
from protocol.wire import WireError, read_uvarint

_PREFIX = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")

_FIRST_TRANSACTIONAL_ID_VERSION = 3
_FIRST_FLEXIBLE_PRODUCE_VERSION = 9


def peek_request(payload: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request payload."""
    if len(payload) < _PREFIX.size:
        raise HeaderError(f"request needs at least {_PREFIX.size} bytes, got {len(payload)}")
    return _PREFIX.unpack_from(payload, 0)


def produce_expects_response(version: int, payload: bytes | bytearray | memoryview) -> bool:
    """Whether a Produce request (whole payload: header and body) wants a response."""
    pos = parse_request_header(payload).header_len
    if version >= _FIRST_FLEXIBLE_PRODUCE_VERSION:
        try:
            length_plus_one, pos = read_uvarint(payload, pos)
        except WireError as exc:
            raise HeaderError(str(exc)) from None
        pos += max(length_plus_one - 1, 0)
    elif version >= _FIRST_TRANSACTIONAL_ID_VERSION:
        if pos + 2 > len(payload):
            raise HeaderError("Produce request ends before transactional_id")
        (length,) = _INT16.unpack_from(payload, pos)
        pos += 2 + max(length, 0)
    if pos + 2 > len(payload):
        raise HeaderError(f"Produce v{version} request ends before acks")
    (acks,) = _INT16.unpack_from(payload, pos)
    return acks != 0
