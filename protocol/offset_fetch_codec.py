"""Hand-written codecs for OffsetFetch (API 9): v0-7 (one group per request) and v8-10
(KIP-709's groups array, what the Java client and librdkafka send; v10 names topics by id).

A consumer fetches the offsets of every partition it owns in one request, so
kafka-python's generic path built one object per partition through
`DataContainer.__init__` and walked them again in its generated encoder: most of the
OffsetFetch path's CPU. Here the response, its groups and topics are built bare (the
attributes kafka-python's constructor sets), each topic's partitions stay what the group
layer answered (`OffsetColumns`, or tuples as `PartitionTuples`), and the frame packs
them with one struct call per topic when no partition carries metadata (the common
case), one per partition otherwise. kafka-python's partition objects are made only when
kafka-python must encode the answer (`materialized`).

Frames are byte-identical to kafka-python's (tests/protocol/test_offset_fetch_codec.py
checks every version over generated responses); anything else (tagged fields, values a
field cannot hold, strings that are not str, a v10 topic without its id) answers None,
and `protocol.messages` falls back to kafka-python, which encodes or refuses it as it
always has.

    response [v3+] throttle_time_ms int32, topics []: name string, partitions []:
             partition_index int32, committed_offset int64, [v5+] committed_leader_epoch
             int32, metadata nullable string, error_code int16; [v2+] error_code int16
    v6-7 are flexible: compact strings and arrays, a tagged-field section per struct,
    and response header v1. v8-10: throttle_time_ms, groups []: group_id, topics (as
    v6-7's; v10 a topic_id uuid in place of the name), error_code.

The request's partitions are one int32 array per topic, decoded with one unpack
(`decode_offset_fetch_request`, `decode_offset_fetch_groups_request`); as OffsetCommit's
decoder, they answer None for anything but a well-formed body (`protocol.field_reader`),
and kafka-python judges that.

    request  group_id string, topics [] ([v2+] nullable: every topic): name string,
             partition_indexes []int32; [v7+] require_stable bool
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any

from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

from protocol.bare import bare, bare_message
from protocol.field_reader import MALFORMED, ClassicReader, FlexibleReader, Malformed
from protocol.topics_frame import (
    BUILT_PARTITIONS,
    FRAME_ERRORS,
    OffsetColumns,
    PartitionTuples,
    append_topics,
    finish_frame,
    string,
    topics_response_frame,
)
from protocol.wire import encode_uvarint

MAX_REQUEST_VERSION = 7       # v0-7: one group
MAX_RESPONSE_VERSION = 7
GROUPS_SINCE = 8              # KIP-709: several groups per request, each with its topics
MAX_GROUPS_REQUEST_VERSION = 10
MAX_GROUPS_RESPONSE_VERSION = 10
MEMBER_SINCE = 9              # KIP-848: the member fetching names itself
TOPIC_IDS_SINCE = 10          # topics named by id

_RequestTopic = OffsetFetchRequest.OffsetFetchRequestTopic
_RequestGroup = OffsetFetchRequest.OffsetFetchRequestGroup
_RequestGroupTopic = _RequestGroup.OffsetFetchRequestTopics
_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = _Topic.OffsetFetchResponsePartition
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_GroupTopic = _Group.OffsetFetchResponseTopics
_GroupPartition = _GroupTopic.OffsetFetchResponsePartitions


def decode_offset_fetch_request(version: int, data: memoryview) -> OffsetFetchRequest | None:
    """The request v0-7 as kafka-python's decoder builds it, or None when kafka-python must
    judge the bytes."""
    def read(r: ClassicReader, request: OffsetFetchRequest) -> None:
        request.group_id = r.string()
        request.topics = _topics(r, version, _RequestTopic, r.nullable_count() if version >= 2 else r.count())
        if version >= 7:
            request.require_stable = _flag(r)
    return _whole(version, FlexibleReader(data) if version >= 6 else ClassicReader(data), read)


def decode_offset_fetch_groups_request(version: int, data: memoryview) -> OffsetFetchRequest | None:
    """v8-10 (several groups; v10 names topics by id) as kafka-python's decoder builds it,
    or None when kafka-python must judge the bytes.

        groups []: group_id string, [v9+] member_id nullable string, [v9+] member_epoch
        int32, topics [] (nullable: every topic): name string ([v10+] topic_id uuid),
        partition_indexes []int32; require_stable bool; all flexible
    """
    def read(r: ClassicReader, request: OffsetFetchRequest) -> None:
        groups = []
        for _ in range(r.count()):
            group = bare(_RequestGroup, version)
            group.group_id = r.string()
            if version >= MEMBER_SINCE:
                group.member_id = r.string(nullable=True)
                group.member_epoch = r.fixed(_INT32)[0]
            group.topics = _topics(r, version, _RequestGroupTopic, r.nullable_count())
            r.tags()
            groups.append(group)
        request.groups = groups
        request.require_stable = _flag(r)
    return _whole(version, FlexibleReader(data), read)


def _whole(version: int, r: ClassicReader, read: Callable[[ClassicReader, OffsetFetchRequest], None]
           ) -> OffsetFetchRequest | None:
    """The request `read` fills from `r`, which it must read to the end; None if it cannot."""
    request = bare(OffsetFetchRequest, version)
    try:
        read(r, request)
        r.tags()
        r.end()
    except MALFORMED:
        return None
    return request


def _topics(r: ClassicReader, version: int, cls: type, n: int | None) -> list | None:
    """`n` requested topics (None: every topic), each its name ([v10+] its id) and its
    partitions, in one unpack."""
    if n is None:
        return None
    topics = []
    for _ in range(n):
        topic: Any = bare(cls, version)
        if version >= TOPIC_IDS_SINCE:
            topic.topic_id = r.uuid()
        else:
            topic.name = r.string()
        topic.partition_indexes = r.int32s(r.count())
        r.tags()
        topics.append(topic)
    return topics


def _flag(r: ClassicReader) -> bool:
    flag = r.data[r.pos]
    if flag > 1:
        raise Malformed
    r.pos += 1
    return flag == 1


def offset_fetch_response(version: int, topics: Iterable[tuple[str, Iterable[tuple[int, int, int, str | None, int]]]],
                          error_code: int = 0) -> OffsetFetchResponse:
    """`OffsetFetchResponse(version=version, throttle_time_ms=0, error_code=error_code,
    topics=[Topic(version=version, name=..., partitions=...)])` without its per-object
    cost. `topics` holds (name, partitions), the partitions `OffsetColumns` or
    (partition_index, committed_offset, committed_leader_epoch, metadata, error_code)
    tuples; a topic keeps columns as they are and tuples as `PartitionTuples`, which the
    frame packs as they are (`materialized` makes kafka-python's objects of them, for
    when kafka-python must encode the answer)."""
    response = bare_message(OffsetFetchResponse, version)
    response.throttle_time_ms = 0
    response.error_code = error_code
    response.topics = _built_topics(version, _Topic, topics)
    return response


def offset_fetch_group(version: int, group_id: str | None, error_code: int,
                       topics: Iterable[tuple[str, Iterable[tuple[int, int, int, str | None, int]]]]) -> Any:
    """v8+: one group's entry, built as `offset_fetch_response` builds a v0-7 answer (its
    topics named; v10's ids are set by the edge that named them)."""
    group = bare(_Group, version)
    group.group_id = group_id
    group.error_code = error_code
    group.topics = _built_topics(version, _GroupTopic, topics)
    return group


def _built_topics(version: int, cls: type, topics: Iterable[tuple[str, Iterable[tuple]]]) -> list:
    out = []
    for name, partitions in topics:
        topic: Any = bare(cls, version)
        topic.name = name
        topic.partitions = partitions if isinstance(partitions, OffsetColumns) else PartitionTuples(partitions)
        out.append(topic)
    return out


def offset_fetch_groups_response(version: int, groups: list) -> OffsetFetchResponse:
    """v8+: `OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)`."""
    response = bare_message(OffsetFetchResponse, version)
    response.throttle_time_ms = 0
    response.groups = groups
    return response


def materialized(response: OffsetFetchResponse) -> OffsetFetchResponse:
    """`response` with kafka-python's partition objects in place of kgc's tuples or
    columns: what its constructors build, for its generic encoder."""
    version = response._version
    if version is not None and version >= GROUPS_SINCE:
        for group in response.groups:
            _materialize(group.topics, version, _GroupPartition)
    else:
        _materialize(response.topics, version, _Partition)
    return response


def _materialize(topics: list, version: int | None, partition_cls: type) -> None:
    for topic in topics:
        if not isinstance(topic.partitions, BUILT_PARTITIONS):
            continue
        answers = []
        for index, offset, epoch, metadata, error in topic.partitions:
            p: Any = bare(partition_cls, version)
            p.partition_index = index
            p.committed_offset = offset
            p.committed_leader_epoch = epoch
            p.metadata = metadata
            p.error_code = error
            answers.append(p)
        topic.partitions = answers


def offset_fetch_response_frame(correlation_id: int, version: int, response: OffsetFetchResponse) -> bytes | None:
    """The whole response frame, or None when kafka-python must encode it (v8+, tagged
    fields, anything it would refuse)."""
    if not 0 <= version <= MAX_RESPONSE_VERSION:
        return None
    return topics_response_frame(correlation_id, version, response, flexible=version >= 6, throttle_since=3,
                                 error_code_since=2, pack_partitions=_pack_partitions)


def offset_fetch_groups_response_frame(correlation_id: int, version: int,
                                      response: OffsetFetchResponse) -> bytes | None:
    """v8-10's whole frame (several groups; v10 names topics by id), or None when
    kafka-python must encode it (tagged fields, anything it would refuse).

        throttle_time_ms int32, groups []: group_id string, topics []: name string ([v10+]
        topic_id uuid), partitions [] (as v6-7's), error_code int16; all flexible
    """
    if not GROUPS_SINCE <= version <= MAX_GROUPS_RESPONSE_VERSION or response.tags or response.unknown_tags:
        return None
    by_id = version >= TOPIC_IDS_SINCE
    try:
        parts = [b"", b"\x00", _INT32.pack(response.throttle_time_ms)]
        groups = response.groups
        parts.append(encode_uvarint(len(groups) + 1))
        for group in groups:
            if group.tags or group.unknown_tags:
                return None
            parts.append(string(group.group_id, True))
            if not append_topics(parts, version, group.topics, flexible=True, pack_partitions=_pack_partitions,
                                 by_id=by_id):
                return None
            parts.append(_TAIL_FLEXIBLE.pack(group.error_code))
        parts.append(b"\x00")
    except FRAME_ERRORS:
        return None
    return finish_frame(parts, correlation_id)


def _pack_partitions(parts: list[bytes], version: int, partitions: Any) -> None:
    """A topic's partitions, from the columns or tuples kgc builds (`OffsetColumns`,
    `PartitionTuples`) or from kafka-python's objects read as the same tuples: one pack
    for the whole topic when no partition carries metadata, else one per partition."""
    n = len(partitions)
    if not n:
        return
    # The columns from one transposition in C (`zip`), which reads each tuple once.
    if isinstance(partitions, OffsetColumns):
        # A stored value's first three items: its offset, leader epoch and metadata.
        offset, epoch, metadata = islice(zip(*partitions.values, strict=False), 3)
        if metadata.count("") != n:
            _pack_each(parts, version, list(partitions))
            return
        _pack_stored(parts, version, partitions.indexes, offset, epoch)
        return
    if type(partitions) is not PartitionTuples:
        partitions = list(map(_AS_TUPLE, partitions))
    index, offset, epoch, metadata, error = zip(*partitions, strict=True)
    if metadata.count("") != n:
        _pack_each(parts, version, partitions)
        return
    # The pack's arguments laid out column by column, each column one C-level pass.
    columns: tuple[Iterable[int] | None, ...]
    if version >= 6:    # (index, offset, epoch, compact length 1 of "", error), tags after
        columns = (index, offset, epoch, None, error)
        layout = _no_metadata_flexible(n)
    else:
        columns = (index, offset, epoch, error) if version >= 5 else (index, offset, error)
        layout = _no_metadata(n, version >= 5)
    width = len(columns)
    args: list = [1] * (width * n)
    for i, column in enumerate(columns):
        if column is not None:
            args[i::width] = column
    parts.append(layout.pack(*args))


def _pack_stored(parts: list[bytes], version: int, index: Sequence[int], offset: Sequence[int],
                 epoch: Sequence[int]) -> None:
    """Stored offsets without metadata, every error NONE: only the index, the offset and
    [v5+] the leader epoch vary, so only they are packed; the metadata's length and the
    error code are zero bytes, but for a flexible version's compact length of "", 1,
    set afterwards in every partition at once."""
    n = len(index)
    with_epoch = version >= 5
    width = 3 if with_epoch else 2
    args: list = [0] * (width * n)
    args[0::width] = index
    args[1::width] = offset
    if with_epoch:
        args[2::width] = epoch
    packed = _stored_layout(n, with_epoch).pack(*args)
    if version >= 6:
        flexible = bytearray(packed)
        flexible[_FLEXIBLE_EMPTY_AT::_WHOLE_FLEXIBLE.size] = b"\x01" * n
        packed = bytes(flexible)
    parts.append(packed)


# A partition as a tuple in the order of its fields on the wire.
_AS_TUPLE = attrgetter("partition_index", "committed_offset", "committed_leader_epoch", "metadata", "error_code")
TUPLE_ERROR_CODE = itemgetter(4)    # a partition tuple's error_code, for the metrics' count
# partition_index, committed_offset, [v5+] committed_leader_epoch, then the metadata:
# int16 length (classic) or its compact uvarint length, one byte below 128 (flexible)
_HEAD_V5 = struct.Struct(">iqih")
_HEAD_V0 = struct.Struct(">iqh")
_HEAD_FLEXIBLE = struct.Struct(">iqiB")
_FIXED_FLEXIBLE = struct.Struct(">iqi")
_INT32 = struct.Struct(">i")
# error_code after the metadata string; flexible ones end with an empty tagged-field section
_TAIL = struct.Struct(">h")
_TAIL_FLEXIBLE = struct.Struct(">hx")
# a whole partition whose metadata is "" or null
_WHOLE_V5 = struct.Struct(">iqihh")
_WHOLE_V0 = struct.Struct(">iqhh")
_WHOLE_FLEXIBLE = struct.Struct(">iqiBhx")


def _pack_each(parts: list[bytes], version: int, partitions: list[tuple]) -> None:
    """One pack per partition tuple (two and the string when it carries metadata)."""
    flexible = version >= 6
    if flexible:
        head, whole, tail, empty, null = _HEAD_FLEXIBLE, _WHOLE_FLEXIBLE, _TAIL_FLEXIBLE, 1, 0
    else:
        head, whole, tail, empty, null = (_HEAD_V5, _WHOLE_V5, _TAIL, 0, -1) if version >= 5 else (
            _HEAD_V0, _WHOLE_V0, _TAIL, 0, -1)
    with_epoch = version >= 5
    append = parts.append
    for index, offset, epoch, metadata, error in partitions:
        fixed = (index, offset, epoch) if with_epoch else (index, offset)
        if metadata == "" or metadata is None:
            append(whole.pack(*fixed, empty if metadata == "" else null, error))
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
        append(tail.pack(error))


@functools.lru_cache(maxsize=256)
def _no_metadata(count: int, with_epoch: bool) -> struct.Struct:
    # One pack for a topic's partitions when none carries metadata (int16 length 0).
    return struct.Struct(">" + ("iqi2xh" if with_epoch else "iq2xh") * count)


@functools.lru_cache(maxsize=256)
def _stored_layout(count: int, with_epoch: bool) -> struct.Struct:
    # `_pack_stored`'s: the metadata's length and the error code as four zero bytes
    # (classic), or the compact length byte, the error code and the tags (flexible).
    return struct.Struct(">" + ("iqi4x" if with_epoch else "iq4x") * count)


# Where a flexible partition's compact metadata length sits (after index, offset, epoch).
_FLEXIBLE_EMPTY_AT = _FIXED_FLEXIBLE.size


@functools.lru_cache(maxsize=256)
def _no_metadata_flexible(count: int) -> struct.Struct:
    # The same for flexible versions: metadata "" is the compact length 1.
    return struct.Struct(">" + "iqiBhx" * count)
