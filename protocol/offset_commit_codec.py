"""Hand-written codecs for OffsetCommit (API 8): request v0-10, response v0-10.

A consumer commits every partition it owns in one request, so per request kafka-python's
generic path built and walked one object per partition three times over (decode, the
response objects, their encode), a large share of the commit path's CPU (docs/benchmarks/notes.md,
"OffsetCommit path"). These do the same with one struct call per partition and bare
object builds.

As in `protocol.heartbeat_codec`, the decoder covers the well-formed common case and answers
None for anything else (a null or negative length, a null in a field that is not
nullable, short bodies, trailing bytes, tagged fields, bytes that are not UTF-8), so
`protocol.messages` falls back to kafka-python, which refuses or logs exactly as it
always has. What they build is what kafka-python builds: a request with the attributes
its decoder sets, a response with the attributes `OffsetCommitResponse(version=...,
topics=[Topic(name=..., partitions=[Partition(partition_index=..., error_code=...)])])`
sets, and byte-identical frames (tests/protocol/test_offset_commit_codec.py checks all
three over generated messages).

    request  group_id string, [v1+] generation_id_or_member_epoch int32, [v1+] member_id
             string, [v7+] group_instance_id nullable string, [v2-4] retention_time_ms
             int64, topics []: name string ([v10] topic_id uuid), partitions []: partition_index int32,
             committed_offset int64, [v6+] committed_leader_epoch int32, [v1]
             commit_timestamp int64, committed_metadata nullable string
    response [v3+] throttle_time_ms int32, topics []: name string ([v10] topic_id uuid),
             partitions []: partition_index int32, error_code int16
    v8+ are flexible: compact strings and arrays, a tagged-field section per struct,
    and response header v1. v10 is what the Java client (4.2+) sends from a
    `group.protocol=consumer` member when every topic it commits has an id.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from itertools import chain
from operator import attrgetter

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from protocol.bare import bare, bare_message
from protocol.field_reader import MALFORMED, ClassicReader, FlexibleReader, Malformed
from protocol.topics_frame import topics_response_frame

MIN_REQUEST_VERSION = 0
MAX_REQUEST_VERSION = 10
MAX_RESPONSE_VERSION = 10
TOPIC_IDS_SINCE = 10

_RequestTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_RequestPartition = _RequestTopic.OffsetCommitRequestPartition
_ResponseTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_ResponsePartition = _ResponseTopic.OffsetCommitResponsePartition

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
# partition_index, committed_offset, [v6+] committed_leader_epoch, [v1] commit_timestamp,
# metadata length
_PARTITION_V6 = struct.Struct(">iqih")
_PARTITION_V2 = struct.Struct(">iqh")
_PARTITION_V1 = struct.Struct(">iqqh")
_PARTITION_FLEXIBLE = struct.Struct(">iqiB")


def decode_offset_commit_request(version: int, data: memoryview) -> OffsetCommitRequest | None:
    """The request, or None when kafka-python must decide (see the module docstring)."""
    try:
        if version >= 8:
            return _decode(version, data, _Flexible(data))
        return _decode(version, data, _Classic(data))
    except MALFORMED:
        return None


class _Classic(ClassicReader):
    """Non-flexible fields, and a commit's partitions."""

    __slots__ = ()

    def partitions(self, version: int, count: int) -> list:
        # The per-partition loop, inlined: one unpack for the fixed fields and the
        # metadata length (nearly always 0).
        data, pos, end = self.data, self.pos, len(self.data)
        with_epoch = version >= 6
        with_timestamp = version == 1
        layout = _PARTITION_V6 if with_epoch else _PARTITION_V1 if with_timestamp else _PARTITION_V2
        unpack, step = layout.unpack_from, layout.size
        out = []
        for _ in range(count):
            p = bare(_RequestPartition, version)
            if with_epoch:
                p.partition_index, p.committed_offset, p.committed_leader_epoch, size = unpack(data, pos)
            elif with_timestamp:
                p.partition_index, p.committed_offset, p.commit_timestamp, size = unpack(data, pos)
            else:
                p.partition_index, p.committed_offset, size = unpack(data, pos)
            pos += step
            if size > 0:
                if pos + size > end:
                    raise Malformed
                p.committed_metadata = str(data[pos:pos + size], "utf-8")
                pos += size
            elif size == 0:
                p.committed_metadata = ""
            elif size == -1:
                p.committed_metadata = None
            else:
                raise Malformed
            out.append(p)
        self.pos = pos
        return out


class _Flexible(FlexibleReader):
    """Flexible fields, and a commit's partitions."""

    __slots__ = ()

    def partitions(self, version: int, count: int) -> list:
        # As `_Classic.partitions` (flexible versions all carry the leader epoch), with a
        # one-byte compact metadata length and an empty tagged-field section per partition.
        data, pos = self.data, self.pos
        end = len(data)
        unpack = _PARTITION_FLEXIBLE.unpack_from
        out = []
        for _ in range(count):
            p = bare(_RequestPartition, version)
            p.partition_index, p.committed_offset, p.committed_leader_epoch, size = unpack(data, pos)
            pos += 17
            if size >= 0x80:        # a metadata string of 127 bytes or more: the slow way
                self.pos = pos - 1
                p.committed_metadata = self.string(nullable=True)
                pos = self.pos
            elif size > 1:
                size -= 1
                if pos + size > end:
                    raise Malformed
                p.committed_metadata = str(data[pos:pos + size], "utf-8")
                pos += size
            else:
                p.committed_metadata = "" if size else None
            if data[pos] != 0:      # anything but an empty tagged-field section
                raise Malformed
            pos += 1
            out.append(p)
        self.pos = pos
        return out


def _decode(version: int, data: memoryview, r: _Classic | _Flexible) -> OffsetCommitRequest:
    # The attributes kafka-python's compiled decoder sets, in-version fields only.
    request = bare(OffsetCommitRequest, version)
    request.group_id = r.string()
    if version >= 1:    # v0 leaves them unset: they read as the schema's -1 and ""
        request.generation_id_or_member_epoch = r.fixed(_INT32)[0]
        request.member_id = r.string()
    if version >= 7:
        request.group_instance_id = r.string(nullable=True)
    if 2 <= version <= 4:
        request.retention_time_ms = r.fixed(_INT64)[0]
    topics = []
    for _ in range(r.count()):
        topic = bare(_RequestTopic, version)
        if version >= TOPIC_IDS_SINCE:
            topic.topic_id = r.uuid()
        else:
            topic.name = r.string()
        topic.partitions = r.partitions(version, r.count())
        r.tags()
        topics.append(topic)
    request.topics = topics
    r.tags()
    r.end()
    return request


# ---------------------------------------------------------------- response


def offset_commit_response(version: int, request: OffsetCommitRequest,
                           errors: Mapping[tuple[int, int], int] | None = None, default: int = 0) -> OffsetCommitResponse:
    """The answer to `request`: every requested partition, in order, with its error code
    from `errors` (keyed by topic index and partition index; absent: `default`)."""
    response = offset_commit_response_shell(version, request)
    for t_index, (topic, out) in enumerate(zip(request.topics, response.topics, strict=True)):
        out.partitions = partition_answers(topic.partitions, t_index, errors, default)
    return response


def offset_commit_response_shell(version: int, request: OffsetCommitRequest) -> OffsetCommitResponse:
    """The answer to `request` with one topic per requested topic, in order, each with
    no partition yet: `partition_answers` fills them (a slice at a time, if need be)."""
    response = bare_message(OffsetCommitResponse, version)
    if version >= 3:
        response.throttle_time_ms = 0
    topics = []
    for topic in request.topics:
        out = bare(_ResponseTopic, None)
        if version >= TOPIC_IDS_SINCE:
            out.topic_id = topic.topic_id
        else:
            out.name = topic.name
        out.partitions = []
        topics.append(out)
    response.topics = topics
    return response


def partition_answers(partitions, t_index: int, errors: Mapping[tuple[int, int], int] | None,
                      default: int = 0) -> list:
    """The answers to requested `partitions` of the topic at `t_index`, as `offset_commit_response`."""
    answers = []
    for p in partitions:
        answer = bare(_ResponsePartition, None)
        answer.partition_index = index = p.partition_index
        answer.error_code = errors.get((t_index, index), default) if errors else default
        answers.append(answer)
    return answers


def offset_commit_response_frame(correlation_id: int, version: int, response: OffsetCommitResponse) -> bytes | None:
    """The whole response frame, or None when kafka-python must encode it (tagged fields,
    a v10 topic whose id is not a UUID, anything it would refuse)."""
    if not 0 <= version <= MAX_RESPONSE_VERSION:
        return None
    return topics_response_frame(correlation_id, version, response, flexible=version >= 8, throttle_since=3,
                                 error_code_since=None, pack_partitions=_pack_answers,
                                 by_id=version >= TOPIC_IDS_SINCE)


def _pack_answers(parts: list[bytes], version: int, partitions: list) -> None:
    parts.append(_partitions(len(partitions), version >= 8).pack(*chain.from_iterable(map(_ANSWER, partitions))))


_ANSWER = attrgetter("partition_index", "error_code")


@functools.lru_cache(maxsize=256)
def _partitions(count: int, flexible: bool) -> struct.Struct:
    # One pack for a topic's partition answers; flexible ones each end with empty tags.
    return struct.Struct(">" + ("ihx" if flexible else "ih") * count)
