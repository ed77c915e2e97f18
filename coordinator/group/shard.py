"""`GroupShard`: the group state machine of one `__consumer_offsets` partition.

The runtime runs every method on the partition's serial executor. Handlers decide and
return a `Result`; they never await, sleep or read a wall clock (the clock, the timer
and the member-id factory are injected).

Hard and soft state:
- committed offsets (and the existence of a simple group) change only in `replay`;
- classic membership is soft state, changed directly by the JoinGroup/SyncGroup/
  Heartbeat/LeaveGroup handlers and their timers (as in Kafka); the GroupMetadata
  records they return are snapshots with `replay=False`. Replaying a GroupMetadata
  record (on load) rebuilds the group as Stable (it has members) or Empty;
- DeleteGroups and the offsets expiry return tombstones that *are* replayed;
- KIP-848 consumer groups (`consumer.manager.ConsumerGroups`) are hard state
  throughout: every change is a replayed record. A group id is either a classic or a
  consumer group: an empty classic group (or one that only has offsets) becomes a
  consumer group when a ConsumerGroupHeartbeat joins it, and an empty consumer group a
  classic one when a JoinGroup does. With members, the two convert online under the
  migration policy (`migration.py`), and classic members inside a consumer group are
  served by `classic_members.ClassicMembers`.

The service checks a null group id before routing; every other request rule, including
"" group ids, session-timeout bounds and where each version puts its errors, is here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    SyncGroupRequest,
)

from coordinator.common.result import (
    MARKER_COMMIT,
    Reply,
    ReplyHandle,
    Result,
    Slices,
    Transaction,
)
from coordinator.common.timer import Timer
from coordinator.group import describe, record_limits
from coordinator.group.adopt import AdoptedOffset, adoption_records
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember
from coordinator.group.classic.heartbeat import heartbeat, leave_group
from coordinator.group.classic.join import join_group
from coordinator.group.classic.manager import Membership
from coordinator.group.classic.state import GroupState
from coordinator.group.classic.sync import sync_group
from coordinator.group.classic_members import ClassicMembers
from coordinator.group.config import GroupConfig
from coordinator.group.consumer.describe import describe_consumer_group
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.manager import ConsumerGroups
from coordinator.group.context import RequestContext
from coordinator.group.errors import CorruptStateError
from coordinator.group.migration import Migration
from coordinator.group.offsets import OffsetManager
from coordinator.group.timer import expire_offsets_key, group_of, heartbeat_key, join_key, sync_key
from coordinator.group.topics import NO_TOPICS, TopicImage
from coordinator.group.views import GroupDescription, GroupListing, OffsetFetchGroup
from coordinator.records import (
    AdoptedGroupKey,
    ConsumerGroupKey,
    ConsumerGroupMetadataKey,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    new_group_metadata_tombstone,
)
from protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)


class GroupShard:
    def __init__(self, partition: int, config: GroupConfig, timer: Timer, clock: Callable[[], int],
                 new_member_id: Callable[[str], str], topics: Callable[[], TopicImage] = lambda: NO_TOPICS,
                 stopwatch: Callable[[], float] | None = None):
        self.partition = partition
        self.config = config
        self.timer = timer
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.adopted: set[str] = set()   # groups ever adopted, deleted since or not
        self.membership = Membership(self.groups, config, timer, clock, new_member_id)
        self.consumer = ConsumerGroups(self.consumer_groups, config, timer, clock, new_member_id, topics, stopwatch)
        self.classic_members = ClassicMembers(self.consumer, config, timer)
        self.migration = Migration(self.membership, self.consumer, config, clock)
        self.consumer.downgrade = self.migration.downgrade
        # (offset, group id) of a replayed tombstone of a classic group with members.
        self._upgrading: tuple[int, str] | None = None
        self.offsets = OffsetManager(self.groups, self.consumer, self.membership, config, clock)

    # ------------------------------------------------------------ single-group APIs

    def join_group(self, ctx: RequestContext, request: JoinGroupRequest, handle: ReplyHandle) -> Result:
        """JoinGroup; `response` is None when parked (answered later by a `Reply` to `handle`)."""
        record_limits.check_join(ctx.client_id, request)
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is None:
            return join_group(self.membership, ctx, request, handle)
        if not consumer_group.is_empty():
            return self.classic_members.join(ctx, request, consumer_group)
        # An empty consumer group becomes a classic group, as in Kafka: its records are
        # deleted (offsets stay), and once that is durable the JoinGroup runs as usual.
        log.info("[group=%s] empty consumer group becomes a classic group", request.group_id)

        def join_once_converted() -> Result:
            joined = join_group(self.membership, ctx, request, handle)
            if joined.response is None:
                return joined
            return replace(joined, response=None, replies=(*joined.replies, Reply(handle, joined.response)))

        return Result(records=tuple(self.consumer.group_tombstones(consumer_group)), after_commit=join_once_converted)

    def consumer_group_heartbeat(self, ctx: RequestContext, request) -> Result:
        """ConsumerGroupHeartbeat (KIP-848); an empty classic group becomes a consumer group."""
        self.consumer.validate(ctx.api_version, request)
        record_limits.check_consumer_heartbeat(
            ctx.client_id, request, request.subscribed_topic_regex if ctx.api_version >= 1 else None)
        group_id = request.group_id
        records: list[CoordinatorRecord] = []
        group = self.consumer_groups.get(group_id)
        if group is None:
            classic = self.groups.get(group_id)
            if request.member_epoch != 0:
                raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            if classic is not None and not classic.is_empty():
                # Online upgrade: decided first, the classic side handed over only once the
                # joiner's heartbeat is accepted too.
                group, records = self.migration.upgrade(classic)
                result = self.consumer.heartbeat(ctx, request, group, records)
                self.migration.detach(classic, group)
                return replace(result, replies=result.replies + tuple(self.membership.take_outbox()))
            if classic is not None and classic.protocol_type is not None:
                log.info("[group=%s] empty classic group becomes a consumer group", group_id)
                records.append(new_group_metadata_tombstone(group_id, generation=classic.generation))
            group = ConsumerGroup(group_id)
        return self.consumer.heartbeat(ctx, request, group, records)

    def describe_consumer_group(self, ctx: RequestContext, group_id: str):
        """ConsumerGroupDescribe of one group; a classic or unknown group is GROUP_ID_NOT_FOUND."""
        return describe_consumer_group(self.consumer_groups.get(group_id), group_id, ctx.api_version,
                                       self.consumer.topics(), self.config.consumer_assignors[0])

    def sync_group(self, ctx: RequestContext, request: SyncGroupRequest, handle: ReplyHandle) -> Result:
        """SyncGroup; parked in CompletingRebalance until the leader's assignment is durable."""
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.sync(ctx, request, consumer_group)
        return sync_group(self.membership, ctx, request, handle)

    def heartbeat(self, ctx: RequestContext, request: HeartbeatRequest) -> Result:
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.heartbeat(ctx, request, consumer_group)
        return heartbeat(self.membership, ctx, request)

    def leave_group(self, ctx: RequestContext, request: LeaveGroupRequest) -> Result:
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.leave(ctx, request, consumer_group)
        return leave_group(self.membership, ctx, request)

    def commit_offsets(self, ctx: RequestContext, request: OffsetCommitRequest) -> Result | Slices:
        """OffsetCommit at the versions kgc serves (`protocol.api_keys.LOCAL_VERSIONS`);
        a large one in slices."""
        return self.offsets.commit(ctx, request)

    def delete_offsets(self, ctx: RequestContext, request: OffsetDeleteRequest) -> Result | Slices:
        return self.offsets.delete(ctx, request)

    # ------------------------------------------------------------ multi-group and read APIs

    def fetch_offsets(self, ctx: RequestContext, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool, member: tuple[str | None, int] = (None, -1),
                      topic_ids: Mapping[str, uuid.UUID] | None = None) -> OffsetFetchGroup:
        """Committed offsets; `topics=None` means all of the group's. With `require_stable`,
        a partition with a pending transactional offset reads UNSTABLE_OFFSET_COMMIT. With
        `topic_ids` (asked by id), an offset committed with another id reads -1."""
        return self.offsets.fetch(group_id, topics, member, require_stable, topic_ids)

    def txn_commit_offsets(self, ctx: RequestContext, request, source_offset: int) -> Result:
        """TxnOffsetCommit, once its participant record is at `source_offset` upstream."""
        return self.offsets.txn_commit(ctx, request, source_offset)

    def end_transaction(self, producer_id: int, producer_epoch: int, marker: int, marker_offset: int) -> Result:
        """The upstream's marker of this producer at `marker_offset` of the participant
        partition: Kafka's marker in our log, if it ends offsets pending here."""
        # The response only releases the caller (the tail), once the marker is durable.
        if not self.offsets.txn.awaits(producer_id, marker_offset):
            return Result(response=False)
        return Result(response=True, transaction=Transaction(producer_id, producer_epoch, marker))

    def txn_tail_start(self) -> int | None:
        return self.offsets.txn.tail_start()

    def replay_transactional(self, offset: int, producer_id: int, record: CoordinatorRecord) -> None:
        self.offsets.txn.replay(offset, producer_id, record)

    def replay_end_transaction(self, producer_id: int, marker: int) -> None:
        self.offsets.txn.end(producer_id, marker == MARKER_COMMIT)

    def describe_group(self, ctx: RequestContext, group_id: str) -> GroupDescription:
        # A consumer group reads as unknown to DescribeGroups, as in Kafka (Dead, or
        # GROUP_ID_NOT_FOUND from v6): clients describe it with ConsumerGroupDescribe.
        groups = {} if group_id in self.consumer_groups else self.groups
        return describe.describe_group(groups, ctx.api_version, group_id)

    def list_groups(self, states_filter: frozenset[str] | set[str],
                    types_filter: frozenset[str] | set[str]) -> list[GroupListing]:
        return (describe.list_groups(self.groups, states_filter, types_filter)
                + describe.list_consumer_groups(self.consumer_groups, states_filter, types_filter))

    def delete_groups(self, ctx: RequestContext, group_ids: list[str]) -> Result:
        """Tombstones for every offset and for the group itself, in one atomic batch."""
        records: list[CoordinatorRecord] = []
        outcome: list[tuple[str, ErrorCode]] = []
        for group_id in group_ids:
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                error = ErrorCode.NONE if consumer_group.is_empty() else ErrorCode.NON_EMPTY_GROUP
                if error is ErrorCode.NONE:
                    records += self.offsets.tombstones_for_group(group_id, ctx)
                    records += self.consumer.group_tombstones(consumer_group)
                outcome.append((group_id, error))
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_in(GroupState.EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            else:
                error = ErrorCode.NONE
                records += self.offsets.tombstones_for_group(group_id, ctx)
                records.append(new_group_metadata_tombstone(group_id, generation=group.generation,
                                                            client_id=ctx.client_id, client_host=ctx.client_host))
            if error is not ErrorCode.NONE:
                log.debug("[group=%s] DeleteGroups refused with %s", group_id, error.name)
            outcome.append((group_id, error))
        return Result(records=tuple(records), response=outcome)

    # ------------------------------------------------------------ adoption

    def knows(self, group_id: str) -> bool:
        """Whether kgc has the group, or adopted it once (its later deletion or expiry does
        not make it adoptable again: the upstream's offsets are older than kgc's were)."""
        return group_id in self.groups or group_id in self.consumer_groups or group_id in self.adopted

    def adopt(self, group_id: str, protocol_type: str, offsets: tuple[AdoptedOffset, ...], source: str) -> Result:
        """A group's state from another coordinator, as records of kgc's own; `response` says
        whether anything was adopted (not when kgc knows the group by now, or there is nothing)."""
        if self.knows(group_id) or not (protocol_type or offsets):
            return Result(response=False)
        return Result(records=adoption_records(group_id, protocol_type, offsets, source=source,
                                               now_ms=self.clock()), response=True)

    # ------------------------------------------------------------ failed operations

    def isolate(self, scope: Hashable) -> Result:
        """After an operation on this shard raised (or returned records that cannot be
        written): what puts its scope back into a state it can serve from.

        `scope` is the group id a request named, or the key of the timer that fired.
        Nothing hard changed (records are replayed only once they serialize), but soft
        membership may be half-updated, so the group is reset (`Membership.reset`);
        replies the interrupted handler collected are answered UNKNOWN_MEMBER_ID too.
        A failed offsets expiry is armed again, so expiry never stops for good.
        """
        aborted = tuple(Reply(r.handle, ApiError(ErrorCode.UNKNOWN_MEMBER_ID, "the group was reset"))
                        for r in self.membership.take_outbox())
        group_id = scope if isinstance(scope, str) else group_of(scope)
        if scope == expire_offsets_key():
            self._schedule_offsets_expiry()
        group = self.groups.get(group_id) if group_id is not None else None
        if group is None:
            return Result(replies=aborted, replay=False)
        result = self.membership.reset(group, "an operation on it failed")
        return Result(records=result.records, replies=aborted + result.replies, replay=False)

    # ------------------------------------------------------------ replay and lifecycle

    def replay(self, offset: int, record: CoordinatorRecord) -> None:
        key = record.key
        if self._upgrading is not None:
            self._check_upgrade_continues(self._upgrading, offset, key)
        if isinstance(key, OffsetCommitKey):
            self.offsets.replay(offset, key, record.value)
        elif isinstance(key, GroupMetadataKey):
            self._replay_group_metadata(offset, key.group, record.value)
        elif isinstance(key, ConsumerGroupKey):
            self._replay_consumer_group(offset, key, record.value)
        elif isinstance(key, AdoptedGroupKey):
            if record.value is None:
                self.adopted.discard(key.group)
            else:
                self.adopted.add(key.group)
        else:
            raise CorruptStateError(f"record at offset {offset} has an unknown key {key!r}")

    def _check_upgrade_continues(self, upgrading: tuple[int, str], offset: int, key) -> None:
        tombstone_offset, group_id = upgrading
        self._upgrading = None
        if not (isinstance(key, ConsumerGroupKey) and key.group == group_id):
            raise CorruptStateError(f"tombstone at offset {tombstone_offset} for group {group_id}, which still "
                                    f"has members, is not followed by its consumer group's records "
                                    f"(offset {offset} is {key!r})")

    def _replay_consumer_group(self, offset: int, key: ConsumerGroupKey, value) -> None:
        group = self.consumer_groups.get(key.group)
        if group is None:
            if value is None:
                return
            classic = self.groups.get(key.group)
            if classic is not None:
                if classic.protocol_type is not None or classic.members:
                    raise CorruptStateError(f"record at offset {offset}: consumer group {key.group} "
                                            f"is still a classic group")
                del self.groups[key.group]   # a group that only had offsets
            group = self.consumer_groups[key.group] = ConsumerGroup(key.group)
        if isinstance(key, ConsumerGroupMetadataKey) and value is None:
            group.check_deletable()
            del self.consumer_groups[key.group]
        else:
            group.replay(key, value)
            group.note_progress(self.clock())

    def _replay_group_metadata(self, offset: int, group_id: str, value: GroupMetadataValue | None) -> None:
        if value is None:
            group = self.groups.get(group_id)
            if group is None:
                return
            if group.members:
                # Only an online upgrade deletes a group with members: its consumer group's
                # records must come next (`_check_upgrade_continues`).
                self._upgrading = (offset, group_id)
            group.transition_to(GroupState.DEAD, self.clock())
            del self.groups[group_id]
            return
        group = ClassicGroup(group_id, GroupState.STABLE if value.members else GroupState.EMPTY, self.clock(),
                             generation=value.generation, protocol_type=value.protocol_type,
                             protocol_name=value.protocol, leader_id=value.leader,
                             current_state_timestamp_ms=value.current_state_timestamp_ms)
        for mm in value.members:
            if value.protocol is None:
                raise CorruptStateError(f"group {group_id} at offset {offset} has members but no protocol")
            group.add(ClassicGroupMember(
                mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                mm.session_timeout_ms if mm.rebalance_timeout_ms == -1 else mm.rebalance_timeout_ms,
                mm.session_timeout_ms, value.protocol_type, ((value.protocol, mm.subscription),),
                mm.assignment), None)
        if value.members and group.leader_id not in group.members:
            raise CorruptStateError(f"group {group_id} at offset {offset}: leader {value.leader!r} is no member")
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group

    def on_loaded(self) -> None:
        """Fresh sessions for every loaded member, oversized groups rebalanced, expiry armed."""
        if self._upgrading is not None:
            offset, group_id = self._upgrading
            raise CorruptStateError(f"the log ends with the tombstone at offset {offset} of group {group_id}, "
                                    f"which still has members")
        for group in self.groups.values():
            log.info("[group=%s] loaded in state %s with %d members", group.group_id, group.state.value,
                     len(group.members))
            for member in group.members.values():
                self.membership.reschedule_heartbeat(group, member)
            if len(group.members) > self.config.group_max_size:
                # group.max.size was lowered: let members commit, then rejoin under the limit.
                self.membership.prepare_rebalance(
                    group, f"loaded with {len(group.members)} members, over {self.config.group_max_size}")
        self.consumer.on_loaded()
        self._schedule_offsets_expiry()

    def on_unloaded(self) -> None:
        """Cancel every timer and drop all state; the runtime answers parked requests."""
        for group in self.groups.values():
            for member_id in list(group.members) + list(group.pending_join_members):
                self.timer.cancel(heartbeat_key(group.group_id, member_id))
            self.timer.cancel(join_key(group.group_id))
            self.timer.cancel(sync_key(group.group_id))
            if not group.is_in(GroupState.DEAD):
                group.transition_to(GroupState.DEAD, self.clock())
        self.timer.cancel(expire_offsets_key())
        self.groups.clear()
        self.consumer.on_unloaded()
        self.offsets.drop_all()

    def delete_offsets_of_topics(self, deleted: Mapping[str, uuid.UUID]) -> Result:
        """The upstream deleted these topics (name -> id): their offsets go, in every group.
        Answers how many."""
        records = self.offsets.tombstones_of_deleted_topics(deleted)
        if records:
            log.info("partition %d: deleting %d offsets of deleted topics %s", self.partition, len(records),
                     sorted(deleted))
        return Result(records=tuple(records), response=len(records))

    # ------------------------------------------------------------ offsets expiry

    def _schedule_offsets_expiry(self) -> None:
        self.timer.schedule(expire_offsets_key(), self.config.offsets_retention_check_interval_ms,
                            self._expire_offsets)

    def _expire_offsets(self) -> Result:
        records: list[CoordinatorRecord] = []
        for group_id, group in list(self.groups.items()):
            if self.offsets.expire(group_id, records) and group.is_empty():
                log.info("[group=%s] every offset expired; deleting the empty group", group_id)
                records.append(new_group_metadata_tombstone(group_id, generation=group.generation))
        for group_id, consumer_group in list(self.consumer_groups.items()):
            if self.offsets.expire(group_id, records) and consumer_group.is_empty():
                log.info("[group=%s] every offset expired; deleting the empty consumer group", group_id)
                records += self.consumer.group_tombstones(consumer_group)
        self._schedule_offsets_expiry()
        return Result(records=tuple(records))


def group_shard_factory(config: GroupConfig, clock: Callable[[], int], new_member_id: Callable[[str], str],
                        topics: Callable[[], TopicImage] = lambda: NO_TOPICS,
                        stopwatch: Callable[[], float] | None = None) -> Callable[[int, Timer], GroupShard]:
    """The runtime's shard factory: a `GroupShard` per partition, on the timer the runtime gives it."""
    def make(partition: int, timer: Timer) -> GroupShard:
        return GroupShard(partition, config, timer, clock, new_member_id, topics, stopwatch=stopwatch)
    return make
