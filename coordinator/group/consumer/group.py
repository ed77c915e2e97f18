"""A KIP-848 consumer group and its members, as replayed from their records.

All of it is hard state: it changes only when `replay` applies a record (on the write
path and on load alike), as Kafka's `ConsumerGroup`. Handlers read it and return records.

- `group_epoch` moves when the group's membership or subscriptions (or the metadata of
  subscribed topics) change; `assignment_epoch` is the epoch of the last computed target
  assignment; each member reconciles towards its `target` at its own `member_epoch`.
- `owners` maps every partition some member holds (assigned, or pending revocation) to
  that member. A partition is handed to a new member only when it is not in `owners`
  (or already that member's): revocation comes before reassignment, so no partition
  ever has two owners.

States (Kafka's `ConsumerGroup.maybeUpdateGroupState`): Empty without members, Assigning
while the group epoch is ahead of the assignment epoch, Reconciling while a member is not
STABLE at the assignment epoch, else Stable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from coordinator.group.errors import CorruptStateError
from coordinator.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitionEpochs,
    TopicPartitions,
)

# topic id → partitions; treated as immutable once built.
Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}
# (topic id, partition) → the member epoch a member was given the partition at (KIP-1251:
# a commit at an older epoch is fenced only for partitions given to it since). A held
# partition with no entry was given at the member's own epoch (0 at least): that is how
# Kafka reads a record without assignment epochs, and it keeps the map to the partitions
# a member has held since before its current epoch.
AssignmentEpochs = Mapping[tuple[uuid.UUID, int], int]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


def to_topic_partitions(assignment: Assignment) -> TopicPartitions:
    return tuple((topic_id, tuple(sorted(partitions)))
                 for topic_id, partitions in sorted(assignment.items(), key=lambda item: item[0].bytes)
                 if partitions)


def to_topic_partition_epochs(assignment: Assignment, epoch_of: Callable[[uuid.UUID, int], int]
                              ) -> TopicPartitionEpochs:
    return tuple((topic_id, partitions, tuple(epoch_of(topic_id, p) for p in partitions))
                 for topic_id, partitions in to_topic_partitions(assignment))


def from_topic_partition_epochs(topics: TopicPartitionEpochs, member_epoch: int,
                                into: dict[tuple[uuid.UUID, int], int]) -> Assignment:
    """The assignment of a record, its partitions' epochs added to `into` (Kafka's
    `Utils.assignmentFromTopicPartitions`: none, or a count that does not match the
    partitions, is read as the member's epoch)."""
    default = max(member_epoch, 0)
    for topic_id, partitions, epochs in topics:
        if epochs is not None and len(epochs) == len(partitions):
            into.update(((topic_id, p), e) for p, e in zip(partitions, epochs, strict=True) if e != default)
    return from_topic_partitions((topic_id, partitions) for topic_id, partitions, _ in topics)


def from_topic_partitions(topics: Iterable[tuple[uuid.UUID, Iterable[int]]] | None) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in topics or ():
        merged = out.get(topic_id, frozenset()) | frozenset(partitions)
        if merged:
            out[topic_id] = merged
    return out


def is_subset(owned: Assignment, of: Assignment) -> bool:
    return all(parts <= of.get(topic_id, frozenset()) for topic_id, parts in owned.items())


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)
    # Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)
    # inside the consumer group: its session timeout and JoinGroup protocols.
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            self.instance_id, self.rack_id, self.client_id, self.client_host,
            tuple(sorted(self.subscribed_topic_names)), self.subscribed_topic_regex, self.rebalance_timeout_ms,
            self.server_assignor, self.classic)

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            self.member_epoch, self.previous_member_epoch, int(self.state),
            to_topic_partition_epochs(self.assigned, self._epoch_of),
            to_topic_partition_epochs(self.pending_revocation, self._epoch_of))

    def same_assignment(self, other: ConsumerGroupMember) -> bool:
        return (self.member_epoch == other.member_epoch and self.previous_member_epoch == other.previous_member_epoch
                and self.state == other.state and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation
                and self.assignment_epochs == other.assignment_epochs)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch the member was given a partition it holds (assigned or pending
        revocation) at; None if it does not hold it."""
        if partition in self.assigned.get(topic_id, ()) or partition in self.pending_revocation.get(topic_id, ()):
            return self._epoch_of(topic_id, partition)
        return None

    def _epoch_of(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.assignment_epochs.get((topic_id, partition), max(self.member_epoch, 0))

    def with_epoch(self, epoch: int, **changes) -> ConsumerGroupMember:
        """A new member epoch remembers the old one: a retried heartbeat of a lost answer
        may still carry it. A partition the member keeps keeps the epoch it was given at;
        one it did not hold is given at `epoch` (unless `assignment_epochs` is passed)."""
        previous = self.member_epoch if epoch != self.member_epoch else self.previous_member_epoch
        if "assignment_epochs" not in changes:
            default = max(epoch, 0)
            epochs: dict[tuple[uuid.UUID, int], int] = {}
            for assignment in (changes.get("assigned", self.assigned),
                               changes.get("pending_revocation", self.pending_revocation)):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        e = self.assignment_epoch(topic_id, p)
                        if e is not None and e != default:
                            epochs[(topic_id, p)] = e
            changes["assignment_epochs"] = epochs
        return replace(self, member_epoch=epoch, previous_member_epoch=previous, **changes)


class ConsumerGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp_ms = 0     # when that assignment was computed (0: not known)
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.static_members: dict[str, str] = {}       # instance id → member id
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        self.regexes: dict[str, ConsumerGroupRegularExpressionValue] = {}
        # Soft: the topic image version the group last checked its subscriptions against.
        self.checked_image_version = -1
        # Soft, for metrics: when the group's current epoch began, and when the group was
        # first Stable at it (None: not yet), on the coordinator's clock.
        self.epoch_since_ms = -1
        self.stable_since_ms: int | None = None
        self._timed_epoch = -1

    # ------------------------------------------------------------ reads

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str]:
        names = {n for m in self.members.values() for n in m.subscribed_topic_names}
        for m in self.members.values():
            if m.subscribed_topic_regex in self.regexes:
                names.update(self.regexes[m.subscribed_topic_regex].topics)
        return names

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's `ConsumerGroup.supportsClassicProtocols`: a classic joiner must speak the
        consumer protocol and share a protocol name with every classic member."""
        if protocol_type != "consumer":
            return False
        names = set(names)
        for member in self.classic_members():
            assert member.classic is not None       # what `classic_members` picks
            names &= {name for name, _ in member.classic.supported_protocols}
        return bool(names)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def preferred_assignor(self, members: Iterable[ConsumerGroupMember], default: str) -> str:
        """The server assignor most members ask for (ties by name), else the default."""
        counts: dict[str, int] = {}
        for m in members:
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))

    # ------------------------------------------------------------ replay

    def replay(self, key: ConsumerGroupKey, value) -> None:
        """One of the group's records; the group's own tombstone (type 3) is the caller's
        to apply, since it removes the group."""
        match key:
            case ConsumerGroupMetadataKey():
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
            case ConsumerGroupMemberMetadataKey():
                self.replay_member_metadata(key.member_id, value)
            case ConsumerGroupTargetAssignmentMetadataKey():
                self.replay_target_metadata(value)
            case ConsumerGroupTargetAssignmentMemberKey():
                self.replay_target_member(
                    key.member_id, None if value is None else from_topic_partitions(value.topic_partitions))
            case ConsumerGroupCurrentMemberAssignmentKey():
                if value is not None or key.member_id in self.members:
                    self.replay_current_assignment(key.member_id, value)
            case ConsumerGroupRegularExpressionKey():
                self.replay_regex(key.regex, value)

    def note_progress(self, now_ms: int) -> None:
        """After a replayed record: start timing a new epoch, or note that it settled."""
        if self.group_epoch != self._timed_epoch:
            self._timed_epoch, self.epoch_since_ms, self.stable_since_ms = self.group_epoch, now_ms, None
        if self.stable_since_ms is None and self.state == "Stable":
            self.stable_since_ms = now_ms

    def check_deletable(self) -> None:
        if self.members or self.target:
            raise CorruptStateError(f"consumer group {self.group_id} deleted while it has members")

    def replay_member_metadata(self, member_id: str, value: ConsumerGroupMemberMetadataValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            if old.member_epoch != LEAVE_EPOCH or old.assigned or old.pending_revocation:
                raise CorruptStateError(f"group {self.group_id}: member {member_id} removed before "
                                        f"its current assignment was")
            if member_id in self.target:
                raise CorruptStateError(f"group {self.group_id}: member {member_id} removed before its target")
            del self.members[member_id]
            if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
                del self.static_members[old.instance_id]
            return
        base = old or ConsumerGroupMember(member_id)
        if old is not None and old.instance_id is not None and old.instance_id != value.instance_id:
            self.static_members.pop(old.instance_id, None)
        self.members[member_id] = replace(
            base, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor, classic=value.classic_member_metadata)
        if value.instance_id is not None:
            self.static_members[value.instance_id] = member_id

    def replay_current_assignment(self, member_id: str,
                                  value: ConsumerGroupCurrentMemberAssignmentValue | None) -> None:
        old = self.members.get(member_id) or ConsumerGroupMember(member_id)
        self._release(old)
        if value is None:
            # Kafka replays a current-assignment tombstone as "left, holding nothing".
            updated = replace(old, member_epoch=LEAVE_EPOCH, previous_member_epoch=LEAVE_EPOCH,
                              state=MemberState.STABLE, assigned={}, pending_revocation={}, assignment_epochs={})
        else:
            epochs: dict[tuple[uuid.UUID, int], int] = {}
            updated = replace(old, member_epoch=value.member_epoch,
                              previous_member_epoch=value.previous_member_epoch,
                              state=MemberState(value.state) if value.state in MemberState._value2member_map_
                              else MemberState.UNKNOWN,
                              assigned=from_topic_partition_epochs(value.assigned_partitions, value.member_epoch,
                                                                   epochs),
                              pending_revocation=from_topic_partition_epochs(value.partitions_pending_revocation,
                                                                             value.member_epoch, epochs),
                              assignment_epochs=epochs)
        self.members[member_id] = updated
        self._claim(updated)

    def replay_target_member(self, member_id: str, assignment: Assignment | None) -> None:
        if assignment is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = assignment

    def replay_target_metadata(self, value: ConsumerGroupTargetAssignmentMetadataValue | None) -> None:
        if value is None:
            if self.target:
                raise CorruptStateError(f"group {self.group_id}: target assignment metadata deleted "
                                        f"while {len(self.target)} members have targets")
            self.assignment_epoch = -1
            self.assignment_timestamp_ms = 0
            return
        self.assignment_epoch = value.assignment_epoch
        self.assignment_timestamp_ms = value.assignment_timestamp

    def replay_regex(self, regex: str, value: ConsumerGroupRegularExpressionValue | None) -> None:
        if value is None:
            self.regexes.pop(regex, None)
        else:
            self.regexes[regex] = value

    def _release(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.owners.get((topic_id, p)) == member.member_id:
                        del self.owners[(topic_id, p)]

    def _claim(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    holder = self.owners.setdefault((topic_id, p), member.member_id)
                    if holder != member.member_id:
                        raise CorruptStateError(f"group {self.group_id}: partition {topic_id}-{p} held by "
                                                f"{holder} and {member.member_id}")
