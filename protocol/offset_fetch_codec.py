"""Hand-written response codec for OffsetFetch (API 9) v0-7: one group per request.

A consumer fetches the offsets of every partition it owns in one request, so
kafka-python's generic path built one object per partition through
`DataContainer.__init__` and walked them again in its generated encoder: most of the
OffsetFetch path's CPU. As `protocol.offset_commit_codec` does for commits, this builds the
response objects bare (the attributes kafka-python's constructor sets) and packs them
with one struct call per topic when no partition carries metadata (the common case),
one per partition otherwise.

The frame is byte-identical to kafka-python's (tests/protocol/test_offset_fetch_codec.py
checks every version over generated responses); anything else (tagged fields, values a
field cannot hold, strings that are not str) answers None, and `protocol.messages`
falls back to kafka-python, which encodes or refuses it as it always has. v8+ (several
groups) takes kafka-python's path.

    response [v3+] throttle_time_ms int32, topics []: name string, partitions []:
             partition_index int32, committed_offset int64, [v5+] committed_leader_epoch
             int32, metadata nullable string, error_code int16; [v2+] error_code int16
    v6-7 are flexible: compact strings and arrays, a tagged-field section per struct,
    and response header v1.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from itertools import chain
from operator import attrgetter

from kafka.protocol.consumer.group import OffsetFetchResponse

from protocol.topics_frame import topics_response_frame
from protocol.wire import encode_uvarint

MAX_RESPONSE_VERSION = 7      # v8+ (several groups) takes kafka-python's path

_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = _Topic.OffsetFetchResponsePartition

_new = object.__new__


def offset_fetch_response(version: int, topics: Iterable[tuple[str, Iterable[tuple[int, int, int, str | None, int]]]],
                          error_code: int = 0) -> OffsetFetchResponse:
    """What `OffsetFetchResponse(version=version, throttle_time_ms=0, error_code=error_code,
    topics=[Topic(version=version, name=..., partitions=[Partition(version=version,
    partition_index=..., committed_offset=..., committed_leader_epoch=..., metadata=...,
    error_code=...)])])` builds, without its per-object cost. `topics` holds (name,
    partitions), each partition a (partition_index, committed_offset,
    committed_leader_epoch, metadata, error_code) tuple."""
    response = _new(OffsetFetchResponse)
    response._header = None
    response._min_version = None
    response._max_version = None
    response._version = version
    response.tags = None
    response.unknown_tags = None
    response.throttle_time_ms = 0
    response.error_code = error_code
    out = []
    for name, partitions in topics:
        topic = _new(_Topic)
        topic._version = version
        topic.tags = None
        topic.unknown_tags = None
        topic.name = name
        answers = []
        for index, offset, epoch, metadata, error in partitions:
            p = _new(_Partition)
            p._version = version
            p.tags = None
            p.unknown_tags = None
            p.partition_index = index
            p.committed_offset = offset
            p.committed_leader_epoch = epoch
            p.metadata = metadata
            p.error_code = error
            answers.append(p)
        topic.partitions = answers
        out.append(topic)
    response.topics = out
    return response


def offset_fetch_response_frame(correlation_id: int, version: int, response: OffsetFetchResponse) -> bytes | None:
    """The whole response frame, or None when kafka-python must encode it (v8+, tagged
    fields, anything it would refuse)."""
    if not 0 <= version <= MAX_RESPONSE_VERSION:
        return None
    return topics_response_frame(correlation_id, version, response, flexible=version >= 6, throttle_since=3,
                                 error_code_since=2, pack_partitions=_pack_partitions)


def _pack_partitions(parts: list[bytes], version: int, partitions: list) -> None:
    if version < 6 and list(map(_METADATA, partitions)).count("") == len(partitions):
        # No metadata anywhere: its int16 length 0 is two pad bytes in one pack.
        fields = _FIELDS_V5 if version >= 5 else _FIELDS_V0
        parts.append(_no_metadata(len(partitions), version >= 5).pack(*chain.from_iterable(map(fields, partitions))))
    else:
        _pack_each(parts, version, partitions)


_METADATA = attrgetter("metadata")
_FIELDS_V5 = attrgetter("partition_index", "committed_offset", "committed_leader_epoch", "error_code")
_FIELDS_V0 = attrgetter("partition_index", "committed_offset", "error_code")
# partition_index, committed_offset, [v5+] committed_leader_epoch, then the metadata:
# int16 length (classic) or its compact uvarint length, one byte below 128 (flexible)
_HEAD_V5 = struct.Struct(">iqih")
_HEAD_V0 = struct.Struct(">iqh")
_HEAD_FLEXIBLE = struct.Struct(">iqiB")
_FIXED_FLEXIBLE = struct.Struct(">iqi")
# error_code after the metadata string; flexible ones end with an empty tagged-field section
_TAIL = struct.Struct(">h")
_TAIL_FLEXIBLE = struct.Struct(">hx")
# a whole partition whose metadata is "" or null
_WHOLE_V5 = struct.Struct(">iqihh")
_WHOLE_V0 = struct.Struct(">iqhh")
_WHOLE_FLEXIBLE = struct.Struct(">iqiBhx")


def _pack_each(parts: list[bytes], version: int, partitions: list) -> None:
    """One pack per partition (two and the string when it carries metadata)."""
    flexible = version >= 6
    if flexible:
        head, whole, tail, empty, null = _HEAD_FLEXIBLE, _WHOLE_FLEXIBLE, _TAIL_FLEXIBLE, 1, 0
    else:
        head, whole, tail, empty, null = (_HEAD_V5, _WHOLE_V5, _TAIL, 0, -1) if version >= 5 else (
            _HEAD_V0, _WHOLE_V0, _TAIL, 0, -1)
    with_epoch = version >= 5
    append = parts.append
    for p in partitions:
        metadata = p.metadata
        fixed = ((p.partition_index, p.committed_offset, p.committed_leader_epoch) if with_epoch
                 else (p.partition_index, p.committed_offset))
        if metadata == "" or metadata is None:
            append(whole.pack(*fixed, empty if metadata == "" else null, p.error_code))
            continue
        if type(metadata) is not str:
            raise TypeError("metadata is not a str")
        data = metadata.encode("utf-8")
        size = len(data)
        if flexible and size >= 0x7F:       # a compact length of two bytes or more
            append(_FIXED_FLEXIBLE.pack(*fixed) + encode_uvarint(size + 1))
        else:
            append(head.pack(*fixed, size + 1 if flexible else size))
        append(data)
        append(tail.pack(p.error_code))


@functools.lru_cache(maxsize=256)
def _no_metadata(count: int, with_epoch: bool) -> struct.Struct:
    # One pack for a topic's partitions when none carries metadata (int16 length 0).
    return struct.Struct(">" + ("iqi2xh" if with_epoch else "iq2xh") * count)
