"""OffsetCommit, OffsetFetch and OffsetDelete.

OffsetCommit's answer and OffsetFetch v0-7's are built by their hand codecs
(`protocol.offset_commit_codec`, `protocol.offset_fetch_codec`), which write the frame
themselves; their error answers, and every other shape, are here.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from protocol.answers.common import UNKNOWN_OFFSET, requested


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


def offset_delete_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return OffsetDeleteResponse(version=version, error_code=code, throttle_time_ms=0, topics=[])
