"""TxnOffsetCommit and AddOffsetsToTxn, the two transaction APIs kgc answers (coordinator/txn)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import AddOffsetsToTxnResponse

from protocol.answers.common import requested
from protocol.txn_offset_commit_messages import TxnOffsetCommitResponse


def txn_offset_commit_response(version: int, request: Any, errors: Mapping[tuple[int, int], int] | None = None,
                               default: int = 0) -> ApiMessage:
    """Every requested partition, in order, with its error from `errors` (keyed by topic
    index and partition index; absent: `default`)."""
    errors = errors or {}
    topic_cls = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    partition_cls = topic_cls.TxnOffsetCommitResponsePartition
    return TxnOffsetCommitResponse(version=version, throttle_time_ms=0, topics=[
        topic_cls(version=version, name=topic.name, topic_id=topic.topic_id, partitions=[
            partition_cls(version=version, partition_index=p.partition_index,
                          error_code=errors.get((t_index, p.partition_index), default))
            for p in topic.partitions])
        for t_index, topic in enumerate(request.topics)])


def txn_offset_commit_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return txn_offset_commit_response(version, requested(request, api, version, "partition"), default=code)


def add_offsets_to_txn_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    """AddOffsetsToTxn's only answer: its code, NONE included."""
    return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=int(code))
