"""Request header parsing, hand-written because every request goes through it.

    v1 (non-flexible): api_key int16, api_version int16, correlation_id int32,
                       client_id nullable string (int16 length, -1 = null)
    v2 (flexible):     v1, then a tagged-field section (uvarint count, then per field
                       uvarint tag, uvarint size, bytes)

`client_id` keeps the int16 length even in v2, so any broker can read the header of an
ApiVersions request of a version it does not know (Kafka `RequestHeader.json`). Header v0
(no client_id) was removed in Kafka 4.0 and is not accepted.

Which version a request uses follows from its api key and version (`api_keys`). For an
API we know nothing about only the v1 part can be read; `header_len` then ends after
`client_id`, which is all an opaque forward needs.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from protocol.api_keys import is_flexible
from protocol.wire import WireError, skip_tagged_fields

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


class HeaderError(ValueError):
    """The request header cannot be read: the connection must close."""


class RequestHeader(NamedTuple):
    # A NamedTuple, not a frozen dataclass: one is made per request, and a frozen
    # dataclass's __init__ (one object.__setattr__ per field) costs several times more.
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_len: int  # offset of the request body in the payload


def parse_request_header(payload: bytes | bytearray | memoryview) -> RequestHeader:
    end = len(payload)
    if end < _FIXED.size:
        raise HeaderError(f"request header needs at least {_FIXED.size} bytes, got {end}")
    api_key, api_version, correlation_id, client_id_len = _FIXED.unpack_from(payload, 0)
    pos = _FIXED.size
    if client_id_len == -1:
        client_id = None
    elif client_id_len < 0:
        raise HeaderError(f"client_id has invalid length {client_id_len}")
    else:
        if pos + client_id_len > end:
            raise HeaderError(f"client_id of {client_id_len} bytes runs past the {end}-byte payload")
        try:
            client_id = str(payload[pos:pos + client_id_len], "utf-8")
        except UnicodeDecodeError as exc:
            raise HeaderError(f"client_id is not UTF-8: {exc}") from None
        pos += client_id_len
    if is_flexible(api_key, api_version):
        try:
            pos = skip_tagged_fields(payload, pos)
        except WireError as exc:
            raise HeaderError(str(exc)) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)
