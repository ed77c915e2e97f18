"""Request decoding and response framing for the APIs kgc answers, on kafka-python 3 codecs.

kafka-python has no api key → class registry for raw requests, so the table is ours
(`protocol.apis`).

Its decoders are lenient where Kafka's generated code is strict, so `decode_request`
adds the checks Kafka makes (generated `*Data.read`):
- a string or bytes field whose length runs past the payload is *truncated*, not
  shortened (kafka-python slices silently; its read position still moves by the
  announced length, so a position past the end gives it away);
- a null (negative length) in a field that is not nullable at this version is refused
  ("non-nullable field X was serialized as null").
Trailing bytes after the body are ignored, as Kafka does (`AbstractRequest.parseRequest`
never checks `buffer.hasRemaining()`); they are logged at debug.

Heartbeat and OffsetCommit, the hottest messages, have hand-written codecs
(`protocol.heartbeat_codec`, `protocol.offset_commit_codec`) for the common case, and so do
OffsetFetch v0-7 responses (`protocol.offset_fetch_codec`); anything unusual still goes
through kafka-python.

Responses are framed here: size, response header (v0, or v1 for flexible versions except
ApiVersions, see `api_keys`), body. Response objects must be built with `version=`
(kafka-python raises when `encode(version=...)` is called on a decoded object).
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable, Sequence
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from kafka.protocol.schemas import BaseField

from protocol import offset_commit_codec, offset_fetch_codec
from protocol.api_keys import response_header_version
from protocol.apis import APIS
from protocol.headers import RequestHeader
from protocol.heartbeat_codec import decode_heartbeat_request, heartbeat_response_frame

log = logging.getLogger(__name__)

# The codecs of the table of APIs (`protocol.apis`), as pairs for the per-request lookup.
_CLASSES: dict[int, tuple[type[ApiMessage], type[ApiMessage]]] = {
    key: (api.request, api.response) for key, api in APIS.items()}

_SIZE_AND_CORRELATION_ID = struct.Struct(">ii")
# Plain ints: the heartbeat path checks them per request, and ApiKey members and the
# codecs' class properties cost Python calls.
_HEARTBEAT = int(ApiKey.Heartbeat)
_HEARTBEAT_MAX_VERSION = HeartbeatRequest.max_version
_OFFSET_COMMIT = int(ApiKey.OffsetCommit)
_OFFSET_FETCH = int(ApiKey.OffsetFetch)
_EMPTY_TAGGED_FIELDS = b"\x00"


class MalformedRequest(ValueError):
    """The request body cannot be decoded; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def request_class(api_key: int) -> type[ApiMessage]:
    try:
        return _CLASSES[api_key][0]
    except KeyError:
        raise KeyError(f"no request codec for api key {api_key}") from None


def response_class(api_key: int) -> type[ApiMessage]:
    try:
        return _CLASSES[api_key][1]
    except KeyError:
        raise KeyError(f"no response codec for api key {api_key}") from None


def decode_request(api_key: int, version: int, payload: bytes | bytearray | memoryview) -> ApiMessage:
    """Decode a request body (the payload after the request header)."""
    data = payload if isinstance(payload, memoryview) else memoryview(payload)
    if api_key == _HEARTBEAT and 0 <= version <= _HEARTBEAT_MAX_VERSION:
        # Hand-decoded (protocol.heartbeat_codec); None means the generic path must judge it.
        request = decode_heartbeat_request(version, data)
        if request is not None:
            return request
    elif api_key == _OFFSET_COMMIT and (offset_commit_codec.MIN_REQUEST_VERSION <= version
                                        <= offset_commit_codec.MAX_REQUEST_VERSION):
        request = offset_commit_codec.decode_offset_commit_request(version, data)
        if request is not None:
            return request
    elif api_key == _OFFSET_FETCH and 0 <= version <= offset_fetch_codec.MAX_GROUPS_REQUEST_VERSION:
        if version < offset_fetch_codec.GROUPS_SINCE:
            request = offset_fetch_codec.decode_offset_fetch_request(version, data)
        else:
            request = offset_fetch_codec.decode_offset_fetch_groups_request(version, data)
        if request is not None:
            return request
    classes = _CLASSES.get(api_key)
    if classes is None:
        raise MalformedRequest(f"no codec for api key {api_key}")
    cls = classes[0]
    if not 0 <= version <= cls.max_version:
        raise MalformedRequest(f"{cls.name} v{version} is outside the codec's 0-{cls.max_version}")
    decode, check = _decoder(api_key, version)
    try:
        request, end = decode(data, 0)
    except Exception as exc:  # anything the generated decoder raises means the bytes are bad
        raise MalformedRequest(f"{cls.name} v{version}: {type(exc).__name__}: {exc}") from exc
    if end > len(data):
        raise MalformedRequest(f"{cls.name} v{version} is truncated: "
                               f"fields need {end} bytes, the body has {len(data)}")
    if end < len(data):
        log.debug("ignoring %d trailing bytes after %s v%d", len(data) - end, cls.name, version)
    check(request)
    return request


def encode_response(header: RequestHeader, response: ApiMessage, version: int) -> bytes:
    """The whole response frame: size, response header, body."""
    if type(response) is HeartbeatResponse and header.api_key == _HEARTBEAT and response.version in (None, version):
        frame = heartbeat_response_frame(header.correlation_id, version, response)
        if frame is not None:
            return frame
    elif (type(response) is OffsetCommitResponse and header.api_key == _OFFSET_COMMIT
          and response.version in (None, version)):
        frame = offset_commit_codec.offset_commit_response_frame(header.correlation_id, version, response)
        if frame is not None:
            return frame
    elif (type(response) is OffsetFetchResponse and header.api_key == _OFFSET_FETCH
          and response.version in (None, version)):
        if version < offset_fetch_codec.GROUPS_SINCE:
            frame = offset_fetch_codec.offset_fetch_response_frame(header.correlation_id, version, response)
        else:
            frame = offset_fetch_codec.offset_fetch_groups_response_frame(header.correlation_id, version, response)
        if frame is not None:
            return frame
        response = offset_fetch_codec.materialized(response)
    if response.API_KEY != header.api_key:
        raise ValueError(f"{response.name} does not answer api key {header.api_key}")
    if response.version is None:
        body = response.encode(version=version)
    elif response.version == version:
        body = response.encode()
    else:
        raise ValueError(f"{response.name} was built at v{response.version}, not v{version}")
    if response_header_version(header.api_key, version):
        size = 4 + len(_EMPTY_TAGGED_FIELDS) + len(body)
        return b"".join((_SIZE_AND_CORRELATION_ID.pack(size, header.correlation_id), _EMPTY_TAGGED_FIELDS, body))
    return b"".join((_SIZE_AND_CORRELATION_ID.pack(4 + len(body), header.correlation_id), body))


@functools.cache
def _decoder(api_key: int, version: int) -> tuple[Callable[[memoryview, int], tuple[Any, int]],
                                                    Callable[[Any], None]]:
    cls = _CLASSES[api_key][0]
    flexible = cls.flexible_version_q(version)
    # The compiled decoder behind `ApiMessage.decode`, called directly for its end
    # position: that position is how truncation is seen.
    decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
    checks = _null_checks(cls.json["fields"], version)
    return decode, functools.partial(_check_not_null, checks=checks, path=cls.name)


# A null check: (attribute, json name, nullable, element checks or None, elements must be non-null)
_Check = tuple[str, str, bool, Sequence["_Check"] | None, bool]


def _null_checks(fields: list[dict], version: int) -> tuple[_Check, ...]:
    """Fields present at `version` that could decode as None and need a look."""
    checks = []
    for field in fields:
        low, high = BaseField.parse_versions(field["versions"])
        if not low <= version <= high:
            continue
        tagged = BaseField.parse_versions(field.get("taggedVersions"))
        if "tag" in field and tagged is not None and tagged[0] <= version <= tagged[1]:
            continue  # an absent tagged field takes its default
        nullable_range = BaseField.parse_versions(field.get("nullableVersions"))
        nullable = nullable_range is not None and nullable_range[0] <= version <= nullable_range[1]
        type_name = field["type"]
        element = type_name[2:] if type_name.startswith("[]") else None
        sub = _null_checks(field["fields"], version) if "fields" in field else None
        elements_non_null = element in ("string", "bytes")
        could_be_null = type_name in ("string", "bytes", "records") or element is not None or sub is not None
        if could_be_null and (not nullable or sub or elements_non_null):
            checks.append((BaseField.underscore_name(field["name"]), field["name"], nullable,
                           sub or None, elements_non_null))
    return tuple(checks)


def _check_not_null(obj: Any, checks: Sequence[_Check], path: str) -> None:
    for attribute, json_name, nullable, sub, elements_non_null in checks:
        value = getattr(obj, attribute)
        if value is None:
            if not nullable:
                raise MalformedRequest(f"non-nullable field {path}.{json_name} was serialized as null")
            continue
        if elements_non_null and None in value:
            raise MalformedRequest(f"non-nullable element of {path}.{json_name} was serialized as null")
        if sub:
            for item in value if isinstance(value, list) else (value,):
                _check_not_null(item, sub, f"{path}.{json_name}")
