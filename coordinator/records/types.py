"""The `__consumer_offsets` record types: their key types and value versions, and one
class per key and value, named as Kafka's generated `*Key`/`*Value` classes.

Their bytes are `codec.py`'s; records are built only by `helpers.py`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

OFFSET_COMMIT_LEGACY_KEY_TYPE = 0
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
CONSUMER_GROUP_METADATA_KEY_TYPE = 3
CONSUMER_GROUP_MEMBER_METADATA_KEY_TYPE = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_TYPE = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_TYPE = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_TYPE = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_TYPE = 16
# kgc's own record type (Kafka's loader skips key types it does not know, with a warning):
# a group kgc adopted from another coordinator (`AdoptedGroupKey`).
ADOPTED_GROUP_KEY_TYPE = 0x4B41
# A client's transaction as the replicated store writes it into its state topic
# (coordinator/replicated/client_txn.py): one of its pending offsets, and its end.
CLIENT_TXN_OFFSET_KEY_TYPE = 0x4B50
CLIENT_TXN_MARKER_KEY_TYPE = 0x4B4D
ADOPTED_GROUP_VALUE_VERSION = 0
CONSUMER_GROUP_VALUE_VERSION = 0

OFFSET_COMMIT_VALUE_VERSION = 3
# The flexible version, with the topic id (a tagged field): what Kafka 4.1+ writes.
OFFSET_COMMIT_VALUE_VERSION_WITH_TOPIC_ID = 4
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
FLEXIBLE_VERSION = 4


# A record's headers: (name, value) pairs; Kafka ignores them in this topic (`headers.py`).
Headers = tuple[tuple[str, bytes | None], ...]


class CoordinatorRecord(NamedTuple):
    # A tuple, not a frozen dataclass: an OffsetCommit builds one per partition.
    key: Any                 # one of the keys below
    value: Any | None        # its value; None is a tombstone
    headers: Headers = ()


class RecordDecodeError(ValueError):
    """Bytes that claim to be a known record but cannot be decoded: the log is corrupt."""


# The two records of every partition commit are tuples, not frozen dataclasses: a commit
# builds one of each per partition, and `tuple.__new__` builds them several times faster.
class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1
    # The id of the topic committed to, when the commit named it by id (OffsetCommit v10+,
    # TxnOffsetCommit v6+): Kafka's tagged field 0 of value v4. None: not recorded (Kafka's
    # zero uuid).
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...] = ()


# ---- KIP-848 consumer groups

# A member's partitions: (topic id, sorted partitions) per topic, topics sorted by id.
TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
# The same with the member epoch each partition was assigned at, one per partition
# (KIP-1251, Kafka 4.3+: tagged field 0); None where the record has none (written by an
# older coordinator), which Kafka reads as the member's epoch.
TopicPartitionEpochs = tuple[tuple[uuid.UUID, tuple[int, ...], tuple[int, ...] | None], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group joined with:
    its session timeout and its JoinGroup protocols (name, ConsumerProtocolSubscription)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    # When that assignment was computed (KIP-1263, Kafka 4.3+; tagged field 0): the next
    # waits `consumer_assignment_interval_ms` after it. 0: not known, or a group that
    # became empty or was converted, whose next assignment need not wait.
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitionEpochs
    partitions_pending_revocation: TopicPartitionEpochs


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group: str
    regex: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class AdoptedGroupKey:
    """A group kgc adopted (`coordinator.group.adopt`). Never tombstoned, so compaction
    keeps it after the group itself is deleted or expires: kgc adopts a group at most
    once, and never brings back offsets older than its own, restarts included."""
    group: str


@dataclass(frozen=True, slots=True)
class AdoptedGroupValue:
    source: str          # where the group came from: "upstream", "kafka-log"
    adopted_at_ms: int


ConsumerGroupKey = (ConsumerGroupMetadataKey | ConsumerGroupMemberMetadataKey
                    | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
                    | ConsumerGroupCurrentMemberAssignmentKey | ConsumerGroupRegularExpressionKey)
ConsumerGroupValue = (ConsumerGroupMetadataValue | ConsumerGroupMemberMetadataValue
                      | ConsumerGroupTargetAssignmentMetadataValue | ConsumerGroupTargetAssignmentMemberValue
                      | ConsumerGroupCurrentMemberAssignmentValue | ConsumerGroupRegularExpressionValue)

RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | AdoptedGroupKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerGroupValue | AdoptedGroupValue
