"""TxnOffsetCommit and AddOffsetsToTxn, the two transaction APIs kgc answers (coordinator/txn)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import AddOffsetsToTxnResponse

from protocol.answers.common import requested
from protocol.txn_offset_commit_messages import TxnOffsetCommitResponse


def txn_offset_commit_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    cls = TxnOffsetCommitResponse
    topics = requested(request, api, version, "partition").topics
    return cls(version=version, throttle_time_ms=0, topics=[
        cls.TxnOffsetCommitResponseTopic(
            version=version, name=topic.name, topic_id=topic.topic_id,
            partitions=[cls.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                version=version, partition_index=partition.partition_index, error_code=code)
                for partition in topic.partitions])
        for topic in topics])


def add_offsets_to_txn_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    """AddOffsetsToTxn's only answer: its code, NONE included."""
    return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=int(code))
