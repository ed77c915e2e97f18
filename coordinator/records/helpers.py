"""One constructor per `__consumer_offsets` record and one per tombstone (Kafka's
`GroupCoordinatorRecordHelpers`): the only place a `CoordinatorRecord` is built, so a
record's key, value and headers are written once.

The classic records carry the audit headers (who wrote them, `headers.py`) unless the
caller gives others (an adopted group's); the KIP-848 records carry none.
"""

from __future__ import annotations

import uuid

from coordinator.records.headers import adoption_headers, audit_headers
from coordinator.records.types import (
    AdoptedGroupKey,
    AdoptedGroupValue,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    Headers,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicPartitions,
)

# ---------------------------------------------------------------- offsets (key types 0, 1)


def new_offset_commit_record(group: str, topic: str, partition: int, value: OffsetCommitValue, *,
                             member_id: str = "", generation: int = -1, client_id: str = "",
                             client_host: str = "", headers: Headers | None = None) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), value,
                             audit_headers(member_id, generation, client_id, client_host)
                             if headers is None else headers)


_new_tuple = tuple.__new__    # skips the NamedTuples' Python-level __new__


def new_offset_commit_records(group: str, topic: str, commits: list[tuple[int, int, int, str]],
                              commit_timestamp_ms: int, expire_timestamp_ms: int, *, member_id: str,
                              generation: int, client_id: str, client_host: str,
                              topic_id: uuid.UUID | None = None) -> list[CoordinatorRecord]:
    """`new_offset_commit_record` for each (partition, offset, leader epoch, metadata) of
    one commit to one topic: the OffsetCommit hot path, so the shared audit headers are
    looked up once and the tuples built without their constructors' Python calls.
    `topic_id`: the topic's id when the commit named it by id (kept in the value, as Kafka
    does)."""
    headers = audit_headers(member_id, generation, client_id, client_host)
    return [_new_tuple(CoordinatorRecord, (
                _new_tuple(OffsetCommitKey, (group, topic, partition)),
                _new_tuple(OffsetCommitValue, (offset, leader_epoch, metadata, commit_timestamp_ms,
                                               expire_timestamp_ms, topic_id)),
                headers))
            for partition, offset, leader_epoch, metadata in commits]


def new_offset_commit_tombstone(group: str, topic: str, partition: int, *, member_id: str = "",
                                generation: int = -1, client_id: str = "",
                                client_host: str = "") -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), None,
                             audit_headers(member_id, generation, client_id, client_host))


# ---------------------------------------------------------------- classic groups (key type 2)


def new_group_metadata_record(group: str, value: GroupMetadataValue, *, member_id: str = "",
                              client_id: str = "", client_host: str = "",
                              headers: Headers | None = None) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group), value,
                             audit_headers(member_id, value.generation, client_id, client_host)
                             if headers is None else headers)


def new_empty_group_metadata_record(group: str, protocol_type: str, timestamp_ms: int, *, member_id: str = "",
                                    client_id: str = "", client_host: str = "",
                                    headers: Headers | None = None) -> CoordinatorRecord:
    """A group with no members at generation 0 (Kafka's `newEmptyGroupMetadataRecord`)."""
    value = GroupMetadataValue(protocol_type, 0, None, None, timestamp_ms, ())
    return new_group_metadata_record(group, value, member_id=member_id, client_id=client_id,
                                     client_host=client_host, headers=headers)


def new_group_metadata_tombstone(group: str, *, member_id: str = "", generation: int = -1,
                                 client_id: str = "", client_host: str = "") -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group), None,
                             audit_headers(member_id, generation, client_id, client_host))


# ---------------------------------------------------------------- KIP-848 consumer groups (3, 5-8, 16)


def new_consumer_group_epoch_record(group: str, epoch: int, metadata_hash: int = 0) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group), ConsumerGroupMetadataValue(epoch, metadata_hash))


def new_consumer_group_epoch_tombstone(group: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group), None)


def new_consumer_group_member_subscription_record(group: str, member_id: str,
                                                  value: ConsumerGroupMemberMetadataValue) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group, member_id), value)


def new_consumer_group_member_subscription_tombstone(group: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group, member_id), None)


def new_consumer_group_target_assignment_record(group: str, member_id: str,
                                                topic_partitions: TopicPartitions) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group, member_id),
                             ConsumerGroupTargetAssignmentMemberValue(topic_partitions))


def new_consumer_group_target_assignment_tombstone(group: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group, member_id), None)


def new_consumer_group_target_assignment_epoch_record(group: str, epoch: int,
                                                      timestamp_ms: int = 0) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group),
                             ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp_ms))


def new_consumer_group_target_assignment_epoch_tombstone(group: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group), None)


def new_consumer_group_current_assignment_record(group: str, member_id: str,
                                                 value: ConsumerGroupCurrentMemberAssignmentValue
                                                 ) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group, member_id), value)


def new_consumer_group_current_assignment_tombstone(group: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group, member_id), None)


def new_consumer_group_regular_expression_record(group: str, regex: str, topics: tuple[str, ...],
                                                 version: int, timestamp_ms: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupRegularExpressionKey(group, regex),
                             ConsumerGroupRegularExpressionValue(topics, version, timestamp_ms))


def new_consumer_group_regular_expression_tombstone(group: str, regex: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupRegularExpressionKey(group, regex), None)


# ---------------------------------------------------------------- kgc's own (AdoptedGroupKey)


def new_adopted_group_record(group: str, source: str, adopted_at_ms: int) -> CoordinatorRecord:
    """Never tombstoned (`types.AdoptedGroupKey`); stamped with `adoption_headers`."""
    return CoordinatorRecord(AdoptedGroupKey(group), AdoptedGroupValue(source, adopted_at_ms),
                             adoption_headers(source, adopted_at_ms))
