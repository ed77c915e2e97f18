"""OffsetCommit, OffsetFetch and OffsetDelete.

OffsetCommit's answer and OffsetFetch's are built by their hand codecs
(`protocol.offset_commit_codec`, `protocol.offset_fetch_codec`), which write the frame
themselves; their error answers, and every other shape, are here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from protocol import offset_fetch_codec
from protocol.answers.common import UNKNOWN_OFFSET, requested
from protocol.errors import ErrorCode


def offset_commit_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    cls = OffsetCommitResponse
    topics = requested(request, api, version, "partition").topics
    return cls(version=version, throttle_time_ms=0, topics=[
        cls.OffsetCommitResponseTopic(
            version=version, name=topic.name, topic_id=topic.topic_id,
            partitions=[cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                version=version, partition_index=partition.partition_index, error_code=code)
                for partition in topic.partitions])
        for topic in topics])


def offset_fetch_group(version: int, group_id: str | None, outcome: Any) -> Any:
    """v8+ (KIP-709): one group's entry; `outcome` is its `coordinator.group.views.OffsetFetchGroup`,
    or the `ErrorCode` its partition failed with."""
    if isinstance(outcome, ErrorCode):
        return offset_fetch_codec.offset_fetch_group(version, group_id, outcome, ())
    if outcome.error is not ErrorCode.NONE:
        return offset_fetch_codec.offset_fetch_group(version, group_id, outcome.error, ())
    return offset_fetch_codec.offset_fetch_group(version, group_id, ErrorCode.NONE,
                                                 ((t.name, t.partitions) for t in outcome.topics))


def offset_fetch_groups_response(version: int, groups: list[Any]) -> ApiMessage:
    return offset_fetch_codec.offset_fetch_groups_response(version, groups)


def offset_fetch_topic_error(version: int, topic: Any, code: int) -> Any:
    """A requested topic's entry with every partition asked for carrying `code` (no
    offset): in the answer's topics before v8, in a group's from v8 on; v10 names it by id."""
    if version < 8:
        topic_cls: Any = OffsetFetchResponse.OffsetFetchResponseTopic
        partition_cls = topic_cls.OffsetFetchResponsePartition
    else:
        topic_cls = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        partition_cls = topic_cls.OffsetFetchResponsePartitions
    named = {"topic_id": topic.topic_id} if version >= 10 else {}
    return topic_cls(version=version, name=topic.name, **named, partitions=[
        partition_cls(version=version, partition_index=index, committed_offset=UNKNOWN_OFFSET,
                      committed_leader_epoch=-1, metadata="", error_code=code)
        for index in topic.partition_indexes])


def offset_fetch_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    cls = OffsetFetchResponse
    if version < 2:
        topic_cls = cls.OffsetFetchResponseTopic
        topics = [
            topic_cls(version=version, name=topic.name, partitions=[
                topic_cls.OffsetFetchResponsePartition(
                    version=version, partition_index=index, committed_offset=UNKNOWN_OFFSET,
                    metadata="", error_code=code)
                for index in topic.partition_indexes])
            for topic in requested(request, api, version, "partition").topics]
        return cls(version=version, topics=topics)
    if version < 8:
        return cls(version=version, throttle_time_ms=0, topics=[], error_code=code)
    groups = requested(request, api, version, "group").groups
    return cls(version=version, throttle_time_ms=0, groups=[
        cls.OffsetFetchResponseGroup(version=version, group_id=group.group_id, topics=[], error_code=code)
        for group in groups])


def offset_delete_response(version: int, code: int, topics: Iterable[Any] = ()) -> ApiMessage:
    """The top-level code and, when the group was found, one entry per requested topic
    (`offset_delete_topic`)."""
    return OffsetDeleteResponse(version=version, error_code=int(code), throttle_time_ms=0, topics=list(topics))


def offset_delete_topic(version: int, name: str, partitions: list[Any]) -> Any:
    return OffsetDeleteResponse.OffsetDeleteResponseTopic(version=version, name=name, partitions=partitions)


def offset_delete_partition(version: int, partition_index: int, code: int) -> Any:
    return OffsetDeleteResponse.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
        version=version, partition_index=partition_index, error_code=int(code))


def offset_delete_topic_error(version: int, topic: Any, code: int) -> Any:
    """A requested topic's entry with every partition asked for carrying `code`."""
    return offset_delete_topic(version, topic.name, [offset_delete_partition(version, p.partition_index, code)
                                                     for p in topic.partitions])


def offset_delete_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return offset_delete_response(version, code)
