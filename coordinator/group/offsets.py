"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, expiry, and their replay.

Offsets are hard state: handlers only validate and return OffsetCommit records (values,
or tombstones); the store changes when `replay` applies them, on the write path and
on load alike. Replaying an offset for a group that does not exist creates a *simple*
group (Empty, no protocol type), as Kafka does for consumers that commit without
joining.

Commit validation (Kafka's `ClassicGroup.validateOffsetCommit`):
- group Dead → COORDINATOR_NOT_AVAILABLE;
- generation < 0 and group Empty (or absent) → accepted;
- generation ≥ 0, a member id or an instance id → the member must exist
  (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID) and the generation match (ILLEGAL_GENERATION);
- generation < 0 without a member id while the group has members → UNKNOWN_MEMBER_ID;
- CompletingRebalance → REBALANCE_IN_PROGRESS;
- absent group with generation ≥ 0 → ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9;
- a KIP-848 consumer group checks member epochs instead (`ConsumerGroups.validate_offset_commit`:
  STALE_MEMBER_EPOCH, the previous epoch accepted for partitions the member still holds,
  and UNSUPPORTED_VERSION for a commit below v9 from one of its members).
OffsetCommit v0 carries neither generation nor member id: it is checked as generation -1
with no member (Kafka kept v0 commits apart, in ZooKeeper; kgc has one store).

Retention (KIP-211, Kafka's `offsetExpirationCondition`): an offset with an explicit
expire timestamp (OffsetCommit v2-4 with a retention) expires at that time. Otherwise
`now - base >= offsets_retention_ms`, where base is (the commit time is the
coordinator's, or the one OffsetCommit v1 names for the partition):
- a group with a protocol type in Empty: the time it became Empty;
- a "consumer" group in Stable that knows its subscriptions: the commit time, and only
  for topics no member subscribes to;
- a simple group (no protocol type): the commit time;
- any other group (rebalancing, or non-"consumer" with members): nothing expires.
A group whose offsets are all gone and that is Empty is deleted with a tombstone.
KIP-848 consumer groups: the commit time, for topics no member subscribes to; an empty
one whose offsets are all gone is deleted with its records' tombstones.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from typing import Any, NamedTuple

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetDeleteRequest

from coordinator.common.result import Result, Slices, Transaction, whole
from coordinator.group.classic.group import ClassicGroup
from coordinator.group.classic.manager import Membership
from coordinator.group.classic.state import GroupState
from coordinator.group.config import GroupConfig
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.manager import ConsumerGroups
from coordinator.group.context import RequestContext
from coordinator.group.record_limits import check_commit_topics
from coordinator.group.txn_offsets import SOURCE_HEADER, PartitionKey, TransactionalOffsets
from coordinator.group.views import (
    FetchedOffsets,
    FetchedPartitions,
    OffsetFetchGroup,
    OffsetFetchPartition,
    OffsetFetchTopic,
)
from coordinator.records import (
    CoordinatorRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    new_offset_commit_records,
    new_offset_commit_tombstone,
)
from protocol.answers.offsets import offset_delete_partition, offset_delete_response, offset_delete_topic
from protocol.answers.transactions import txn_offset_commit_response
from protocol.errors import ErrorCode
from protocol.offset_commit_codec import (
    offset_commit_response,
    offset_commit_response_shell,
    partition_answers,
)

log = logging.getLogger(__name__)
# TxnOffsetCommit v6 (KIP-1319) answers GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH.
_TXN_NAMED_ERRORS_SINCE = 6

_UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)
_OFFSET_METADATA_TOO_LARGE = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)

# group → topic → partition → committed value
OffsetMap = dict[str, dict[str, dict[int, OffsetCommitValue]]]

# Partitions (and topics) of an OffsetCommit or OffsetDelete decided in one step: a
# larger one is decided in slices of this many, the loop let run between them
# (`result.Slices`).
COMMIT_SLICE = 1_000


class _CommitTerms(NamedTuple):
    """What every record of one commit shares."""
    group_id: str
    now: int
    expire_ms: int
    max_metadata_bytes: int
    with_epoch: bool        # v6+ carry the leader epoch
    stamped: bool           # v1 may name each partition's commit time
    audit: dict[str, Any]   # the member, generation and client the records name


def utf16_length(s: str) -> int:
    """Java's `String.length()`: characters outside the BMP count twice."""
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


class OffsetManager:
    """Committed offsets of one partition's groups (Kafka's OffsetMetadataManager)."""

    def __init__(self, groups: dict[str, ClassicGroup], consumer: ConsumerGroups,
                 membership: Membership, config: GroupConfig, clock: Callable[[], int]):
        self.groups = groups
        self.consumer = consumer
        self.consumer_groups = consumer.groups
        self.membership = membership
        self.config = config
        self.clock = clock
        self.committed: OffsetMap = {}
        # The log offset of each committed value's record: a transaction's commit keeps
        # its offset only if it was written later than this (TransactionalOffsets).
        self.committed_at: dict[PartitionKey, int] = {}
        self.txn = TransactionalOffsets(self.replay, lambda key: self.committed_at.get(key, -1))

    # ------------------------------------------------------------ replay

    def replay(self, offset: int, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        by_topic = self.committed.get(key.group)
        if value is None:
            self.txn.drop_partition(key.group, key.topic, key.partition)
            self.committed_at.pop((key.group, key.topic, key.partition), None)
            if by_topic is None:
                return
            by_partition = by_topic.get(key.topic)
            if by_partition is None:
                return
            by_partition.pop(key.partition, None)
            if not by_partition:
                del by_topic[key.topic]
            if not by_topic:
                del self.committed[key.group]
            return
        if key.group not in self.groups and key.group not in self.consumer_groups:
            self.groups[key.group] = ClassicGroup(key.group, GroupState.EMPTY, self.clock())
        if by_topic is None:
            by_topic = self.committed[key.group] = {}
        by_topic.setdefault(key.topic, {})[key.partition] = value
        self.committed_at[(key.group, key.topic, key.partition)] = offset

    def drop_all(self) -> None:
        self.committed.clear()
        self.committed_at.clear()

    # ------------------------------------------------------------ commit

    def commit(self, ctx: RequestContext, request: OffsetCommitRequest) -> Result | Slices:
        version = ctx.api_version
        group_id = request.group_id
        check_commit_topics(_topic_name(version, topic) for topic in request.topics)
        # v0 carries neither: kafka-python reads them as the schema's defaults, -1 and "", so
        # a v0 commit is validated and stored as any commit outside a generation.
        generation = request.generation_id_or_member_epoch
        member_id = request.member_id
        instance_id = request.group_instance_id if version >= 7 else None
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = self.consumer.validate_offset_commit(
                consumer_group, member_id, generation, version,
                ((_topic_name(version, t), (p.partition_index for p in t.partitions)) for t in request.topics))
        elif group is None:
            if generation < 0:
                error = ErrorCode.NONE
            else:
                # v9+ (KIP-848) says GROUP_ID_NOT_FOUND; older clients expect ILLEGAL_GENERATION.
                error = ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
        else:
            error = self._validate_commit(group, member_id, instance_id, generation)
        if error is not ErrorCode.NONE:
            log.debug("[group=%s] OffsetCommit from %r (generation %d) refused with %s",
                      group_id, member_id, generation, error.name)
            if _request_size(request) > COMMIT_SLICE:
                return self._commit_in_slices(version, request, {}, None, int(error))
            return Result(response=offset_commit_response(version, request, default=int(error)))

        if group is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Classic protocol: a commit keeps the member's session alive.
            self.membership.reschedule_heartbeat(group, group.member(member_id))

        retention_ms = request.retention_time_ms if 2 <= version <= 4 else -1
        now = self.clock()
        terms = _CommitTerms(
            group_id, now, -1 if retention_ms == -1 else now + retention_ms, self.config.offset_metadata_max_bytes,
            version >= 6, version == 1, {"member_id": member_id, "generation": generation,
                                         "client_id": ctx.client_id, "client_host": ctx.client_host})
        errors: dict[tuple[int, int], int] = {}
        if _request_size(request) > COMMIT_SLICE:
            return self._commit_in_slices(version, request, errors, terms)
        records: list[CoordinatorRecord] = []
        for t_index, topic in enumerate(request.topics):
            records += self._topic_records(t_index, _topic_name(version, topic), topic.partitions, errors, terms,
                                           _topic_id(version, topic))
        return Result(records=tuple(records), response=offset_commit_response(version, request, errors))

    def _commit_in_slices(self, version: int, request: OffsetCommitRequest, errors: dict[tuple[int, int], int],
                          terms: _CommitTerms | None, refusal: int = 0) -> Slices:
        """A commit too large to decide in one step: the records and answers of about
        `COMMIT_SLICE` partitions per slice, in request order (see `result.Slices`); with
        no `terms`, a refused one, every partition answered `refusal`."""
        response = offset_commit_response_shell(version, request)
        records: list[CoordinatorRecord] = []
        work = 0
        for t_index, topic in enumerate(request.topics):
            name = _topic_name(version, topic)
            topic_id = _topic_id(version, topic)
            partitions = topic.partitions
            answers = response.topics[t_index].partitions
            for start in range(0, max(len(partitions), 1), COMMIT_SLICE):
                piece = partitions[start:start + COMMIT_SLICE]
                if terms is not None:
                    records += self._topic_records(t_index, name, piece, errors, terms, topic_id)
                answers += partition_answers(piece, t_index, errors, refusal)
                work += len(piece) + 1
                if work >= COMMIT_SLICE:
                    yield tuple(records)
                    records, work = [], 0
        return Result(records=tuple(records), response=response)

    @staticmethod
    def _topic_records(t_index: int, name: str | None, partitions, errors: dict[tuple[int, int], int],
                       terms: _CommitTerms, topic_id: uuid.UUID | None = None) -> list[CoordinatorRecord]:
        """The records committing `partitions` of one topic; refusals go to `errors`.
        `topic_id`: the id the request named the topic by (v10+), kept in the values as
        Kafka 4.1+ keeps it (`OffsetAndMetadata.fromRequest`)."""
        if name is None:
            for p in partitions:
                errors[t_index, p.partition_index] = _UNKNOWN_TOPIC_ID
            return []
        group_id, now, expire_ms, max_bytes, with_epoch, stamped, audit = terms
        records: list[CoordinatorRecord] = []
        commits: list[tuple[int, int, int, str]] = []
        for p in partitions:
            metadata = p.committed_metadata
            if metadata and len(metadata) * 2 > max_bytes and utf16_length(metadata) > max_bytes:
                log.debug("[group=%s] metadata of %s-%d too large", group_id, name, p.partition_index)
                errors[t_index, p.partition_index] = _OFFSET_METADATA_TOO_LARGE
                continue
            commit = (p.partition_index, p.committed_offset, p.committed_leader_epoch if with_epoch else -1,
                      metadata or "")
            if stamped and p.commit_timestamp != -1:
                # v1 may name a partition's commit time (-1: the coordinator's), which
                # Kafka stored as given: it is what retention counts from. The records
                # keep the request's order (the last of a partition listed twice wins).
                records += new_offset_commit_records(group_id, name, commits, now, expire_ms, **audit,
                                                     topic_id=topic_id)
                records += new_offset_commit_records(group_id, name, [commit], p.commit_timestamp,
                                                     expire_ms, **audit, topic_id=topic_id)
                commits = []
            else:
                commits.append(commit)
        records += new_offset_commit_records(group_id, name, commits, now, expire_ms, **audit, topic_id=topic_id)
        return records

    def txn_commit(self, ctx: RequestContext, request, source_offset: int) -> Result:
        """TxnOffsetCommit, staged by its participant record at `source_offset`:
        the offsets become pending offsets of the request's producer (Kafka's
        `validateTransactionalOffsetCommit`, then `commitTransactionalOffset`)."""
        version = ctx.api_version
        group_id = request.group_id
        generation = request.generation_id if version >= 3 else -1
        member_id = request.member_id if version >= 3 else ""
        instance_id = request.group_instance_id if version >= 3 else None
        error = self._validate_txn_commit(group_id, member_id, instance_id, generation, version,
                                          ((t.name, (p.partition_index for p in t.partitions)) for t in request.topics))
        errors: dict[tuple[int, int], int] = {}
        records: list[CoordinatorRecord] = []
        if error is ErrorCode.NONE:
            now = self.clock()
            terms = _CommitTerms(group_id, now, -1, self.config.offset_metadata_max_bytes, version >= 2, False,
                                 {"member_id": member_id, "generation": generation,
                                  "client_id": ctx.client_id, "client_host": ctx.client_host})
            source = ((SOURCE_HEADER, str(source_offset).encode()),)
            for t_index, topic in enumerate(request.topics):
                records += [record._replace(headers=record.headers + source) for record in
                            self._topic_records(t_index, topic.name, topic.partitions, errors, terms,
                                                _txn_topic_id(version, topic))]
        else:
            log.debug("[group=%s] TxnOffsetCommit from %r (generation %d) refused with %s",
                      group_id, member_id, generation, error.name)
        response = txn_offset_commit_response(version, request, errors, int(error))
        if not records:
            return Result(response=response)
        return Result(records=tuple(records), response=response,
                      transaction=Transaction(request.producer_id, request.producer_epoch))

    def _validate_txn_commit(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                             version: int, committed: Iterable[tuple[str | None, Iterable[int]]]) -> ErrorCode:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if generation < 0 and member_id == "" and instance_id is None:
                return ErrorCode.NONE       # an old client: no member information to check
            # Checked as an OffsetCommit of the newest version: a transactional commit may
            # come at any version (Kafka skips the version check for it).
            error = self.consumer.validate_offset_commit(consumer_group, member_id, generation, 9, committed)
            if error is ErrorCode.STALE_MEMBER_EPOCH and version < _TXN_NAMED_ERRORS_SINCE:
                return ErrorCode.ILLEGAL_GENERATION
            return error
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                return ErrorCode.NONE
            return ErrorCode.GROUP_ID_NOT_FOUND if version >= _TXN_NAMED_ERRORS_SINCE else ErrorCode.ILLEGAL_GENERATION
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and member_id == "" and instance_id is None:
            # Kafka accepts a transactional commit without member information on any group.
            return ErrorCode.NONE
        error = group.validate_member(member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        # CompletingRebalance is allowed for transactional commits (unlike plain ones).
        return ErrorCode.NONE if generation == group.generation else ErrorCode.ILLEGAL_GENERATION

    @staticmethod
    def _validate_commit(group: ClassicGroup, member_id: str, instance_id: str | None,
                         generation: int) -> ErrorCode:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_in(GroupState.EMPTY):
            # Admin tools and assign() consumers commit outside any generation.
            return ErrorCode.NONE
        if generation >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.NONE:
                return error
            if generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The member holds this generation's JoinGroup answer but not yet its assignment.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------ fetch

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
              member: tuple[str | None, int] = (None, -1), require_stable: bool = False,
              topic_ids: Mapping[str, uuid.UUID] | None = None) -> OffsetFetchGroup:
        """A missing group, or a missing offset, reads as offset -1 with no error (as Kafka).
        `member` (v9+: member id, member epoch) is checked against a consumer group. With
        `require_stable`, a partition with a pending transactional offset reads as
        UNSTABLE_OFFSET_COMMIT (Kafka's `fetchOffsets` with `lastCommittedOffset` MAX).
        `topic_ids` (v10+: the ids the topics were asked by): an offset committed with
        another id, to a topic of the same name since deleted, reads as -1 (Kafka 4.1+'s
        `isMismatchedTopicId`)."""
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = ConsumerGroups.validate_offset_fetch(consumer_group, *member)
            if error is not ErrorCode.NONE:
                return OffsetFetchGroup(group_id, error, ())
            stored = self.committed.get(group_id, {})
        else:
            stored = {} if group is None or group.is_in(GroupState.DEAD) else self.committed.get(group_id, {})
        unstable = self.txn.open.get(group_id, {}) if require_stable else {}
        if topics is None:
            listed = {topic: sorted(parts) for topic, parts in stored.items()}
            for topic, partition in unstable:
                if partition not in stored.get(topic, {}):
                    listed.setdefault(topic, []).append(partition)
            topics = sorted((topic, sorted(parts)) for topic, parts in listed.items())
        out = []
        for topic, partitions in topics:
            fetched: FetchedPartitions = _fetched(stored.get(topic, {}), partitions)
            asked_id = topic_ids.get(topic) if topic_ids else None
            if asked_id is not None:
                fetched = _of_topic_id(stored.get(topic, {}), fetched, asked_id)
            if unstable:
                fetched = tuple(OffsetFetchPartition(p.partition, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
                                if (topic, p.partition) in unstable else p for p in fetched)
            out.append(OffsetFetchTopic(topic, fetched))
        return OffsetFetchGroup(group_id, ErrorCode.NONE, tuple(out))

    # ------------------------------------------------------------ delete

    def delete(self, ctx: RequestContext, request: OffsetDeleteRequest) -> Result | Slices:
        group_id = request.group_id

        def refuse(error: ErrorCode, reason: str) -> Result:
            log.debug("[group=%s] OffsetDelete refused with %s: %s", group_id, error.name, reason)
            return Result(response=offset_delete_response(ctx.api_version, error))

        if group_id == "":
            return refuse(ErrorCode.INVALID_GROUP_ID, "empty group id")
        group = self.groups.get(group_id) or self.consumer_groups.get(group_id)
        classic = group if isinstance(group, ClassicGroup) else None
        if group is None or (classic is not None and classic.is_in(GroupState.DEAD)):
            return refuse(ErrorCode.GROUP_ID_NOT_FOUND, "no such group")
        if classic is not None and classic.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE) and not classic.uses_consumer_protocol():
            return refuse(ErrorCode.NON_EMPTY_GROUP, "group has members and no consumer subscriptions")

        slices = self._delete_in_slices(ctx, group, request)
        return slices if _request_size(request) > COMMIT_SLICE else whole(slices)

    def _delete_in_slices(self, ctx: RequestContext, group: ClassicGroup | ConsumerGroup,
                          request: OffsetDeleteRequest) -> Slices:
        """The tombstones and answers of about `COMMIT_SLICE` partitions per slice."""
        group_id = request.group_id
        version = ctx.api_version
        stored = self.committed.get(group_id, {})
        records: list[CoordinatorRecord] = []
        topics = []
        work = 0
        for topic in request.topics:
            subscribed = group.is_subscribed_to_topic(topic.name)
            held = stored.get(topic.name, {})
            partitions = topic.partitions
            parts: list[Any] = []
            for start in range(0, max(len(partitions), 1), COMMIT_SLICE):
                piece = partitions[start:start + COMMIT_SLICE]
                if subscribed:
                    parts += (offset_delete_partition(version, p.partition_index, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                              for p in piece)
                else:
                    for p in piece:
                        parts.append(offset_delete_partition(version, p.partition_index, ErrorCode.NONE))
                        if p.partition_index in held:
                            records.append(new_offset_commit_tombstone(
                                group_id, topic.name, p.partition_index, client_id=ctx.client_id,
                                client_host=ctx.client_host))
                work += len(piece) + 1
                if work >= COMMIT_SLICE:
                    yield tuple(records)
                    records, work = [], 0
            topics.append(offset_delete_topic(version, topic.name, parts))
        return Result(records=tuple(records), response=offset_delete_response(version, ErrorCode.NONE, topics))

    def tombstones_for_group(self, group_id: str, ctx: RequestContext) -> list[CoordinatorRecord]:
        return [new_offset_commit_tombstone(group_id, topic, partition, client_id=ctx.client_id,
                                            client_host=ctx.client_host)
                for topic, parts in self.committed.get(group_id, {}).items() for partition in parts]

    # ------------------------------------------------------------ deleted topics

    def tombstones_of_deleted_topics(self, deleted: Mapping[str, uuid.UUID]) -> list[CoordinatorRecord]:
        """Kafka's `onTopicsDeleted`: a tombstone for every offset, committed or pending in a
        transaction, of a deleted topic (name -> its id) in every group, whatever the group
        subscribes to. An offset recorded with another id belongs to a topic of that name
        created since, and stays."""
        doomed: dict[PartitionKey, None] = {}
        for group_id, by_topic in self.committed.items():
            for name in deleted.keys() & by_topic.keys():
                topic_id = deleted[name]
                for partition, value in by_topic[name].items():
                    if value.topic_id is None or value.topic_id == topic_id:
                        doomed[(group_id, name, partition)] = None
        for pending in self.txn.pending.values():
            for key, entry in pending.items():
                deleted_id = deleted.get(key[1])
                if deleted_id is not None and entry.value.topic_id in (None, deleted_id):
                    doomed[key] = None
        return [new_offset_commit_tombstone(group_id, topic, partition) for group_id, topic, partition in doomed]

    # ------------------------------------------------------------ expiry

    def expire(self, group_id: str, records: list[CoordinatorRecord]) -> bool:
        """Append tombstones for expired offsets; True when the group has none left."""
        by_topic = self.committed.get(group_id)
        if by_topic is None:
            return not self.txn.has_open(group_id)
        group = self.groups.get(group_id) or self.consumer_groups[group_id]
        # KIP-848 groups count from the commit (Kafka's ConsumerGroup.offsetExpirationCondition).
        base = _commit_time if isinstance(group, ConsumerGroup) else _expiration_base(group)
        if base is None:
            return False
        now = self.clock()
        retention_ms = self.config.offsets_retention_ms
        all_expired = True
        for topic, parts in by_topic.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for partition, value in parts.items():
                if self.txn.is_open(group_id, topic, partition):
                    all_expired = False     # Kafka never expires an offset a transaction may still replace
                    continue
                if value.expire_timestamp_ms != -1:
                    expired = now >= value.expire_timestamp_ms
                else:
                    expired = now - base(value) >= retention_ms
                if expired:
                    log.debug("[group=%s] offset of %s-%d expired", group_id, topic, partition)
                    records.append(new_offset_commit_tombstone(group_id, topic, partition))
                else:
                    all_expired = False
        return all_expired


def _expiration_base(group: ClassicGroup) -> Callable[[OffsetCommitValue], int] | None:
    if group.protocol_type is None:
        return _commit_time
    if group.is_in(GroupState.EMPTY):
        became_empty_ms = group.current_state_timestamp_ms
        # Groups loaded from GroupMetadata v0/v1 do not know when they became Empty.
        return _commit_time if became_empty_ms < 0 else (lambda value: became_empty_ms)
    if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in(GroupState.STABLE):
        return _commit_time
    return None


def _commit_time(value: OffsetCommitValue) -> int:
    return value.commit_timestamp_ms


def _of_topic_id(stored: dict[int, OffsetCommitValue], fetched: FetchedPartitions,
                 topic_id: uuid.UUID) -> tuple[OffsetFetchPartition, ...]:
    """`fetched` without the offsets committed with another topic id than `topic_id`."""
    out = []
    for p in fetched:
        value = stored.get(p.partition)
        recorded = None if value is None else value.topic_id
        out.append(p if recorded is None or recorded == topic_id else _new_tuple(OffsetFetchPartition, (
            p.partition, -1, -1, "", _NONE)))
    return tuple(out)


def _fetched(stored: dict[int, OffsetCommitValue], partitions: list[int]) -> FetchedOffsets:
    """`partitions`' committed offsets in `stored`, -1 for none: the hot part of a large
    OffsetFetch, one dict lookup per partition, in C."""
    return FetchedOffsets(partitions, list(map(stored.get, partitions, repeat(_NO_OFFSET, len(partitions)))))


# What a partition with no committed offset answers: offset -1, leader epoch -1, metadata "".
_NO_OFFSET = OffsetCommitValue(-1, -1, "", -1)


_new_tuple = tuple.__new__
_NONE = ErrorCode.NONE


def _topic_name(version: int, topic) -> str | None:
    if version < 10:
        return topic.name
    # v10 names topics by id; the edge (`net/topic_ids.py`) sets `name` from the id it
    # resolved and answers unknown ids itself, so a topic left without a name is one too.
    return getattr(topic, "name", None) or None


def _topic_id(version: int, topic) -> uuid.UUID | None:
    # The topic's id, when the commit named it by id (v10+). Kafka keeps it in the value.
    return getattr(topic, "topic_id", None) if version >= 10 else None


def _txn_topic_id(version: int, topic) -> uuid.UUID | None:
    # TxnOffsetCommit names topics by id from v6 (KIP-1319).
    return getattr(topic, "topic_id", None) if version >= 6 else None


def _request_size(request: OffsetCommitRequest | OffsetDeleteRequest) -> int:
    """The topics and partitions a commit or an OffsetDelete names: its work, in
    `COMMIT_SLICE` units."""
    return len(request.topics) + sum(len(topic.partitions) for topic in request.topics)
