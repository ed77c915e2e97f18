"""Classic members inside a KIP-848 consumer group (Kafka's `classicGroupJoinToConsumerGroup`,
`classicGroupSyncToConsumerGroup`, `classicGroupHeartbeatToConsumerGroup`,
`classicGroupLeaveToConsumerGroup`).

A consumer that speaks the classic protocol keeps speaking it in a consumer group (after
an online upgrade, or joining one): the server-side assignor assigns it like any member,
and the classic APIs carry that to it.

- JoinGroup: the member is created or updated from its subscription (its topics, and the
  partitions it says it owns, v1+), runs through the same epoch / target assignment /
  reconciliation as a ConsumerGroupHeartbeat (`ConsumerGroups.advance`), and is answered
  once its records are durable with generation = its member epoch. It never leads: the
  assignment is the server's. A dynamic member without id gets MEMBER_ID_REQUIRED first.
- SyncGroup: answers the member's assigned partitions as a ConsumerProtocolAssignment, in
  the version of its subscription; the leader's assignments, if any, are ignored.
- Heartbeat: REBALANCE_IN_PROGRESS when the member must rejoin: the group has a newer
  epoch (its JoinGroup computes the new target if nobody has yet), it has partitions to
  revoke, or partitions it waits for have been released. A classic member learns of
  revocations only so: partitions pending revocation stay its own until a JoinGroup
  shows it let them go, so no partition has two owners.
- LeaveGroup: the members are fenced as a ConsumerGroupHeartbeat leave would be (and the
  group becomes a classic group if only classic members remain, `migration.py`).

Timers: the member's session (its own session timeout); after REBALANCE_IN_PROGRESS it
must rejoin within its rebalance timeout, and after a JoinGroup sync within it, or it is
fenced.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

from coordinator.common.result import EMPTY_RESULT, Result
from coordinator.common.timer import Timer
from coordinator.group.config import GroupConfig
from coordinator.group.consumer.consumer_protocol import encode_assignment, owned_partitions
from coordinator.group.consumer.group import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from coordinator.group.consumer.manager import (
    ConsumerGroups,
    check_static_holder,
    successor_of,
)
from coordinator.group.context import RequestContext
from coordinator.group.subscription import MalformedProtocol, decode_subscription, subscription_version
from coordinator.group.timer import classic_join_key, classic_sync_key
from coordinator.records import ClassicMemberMetadata, ConsumerGroupMetadataKey
from protocol.answers.classic import (
    JoinAnswer,
    SyncAnswer,
    heartbeat_response,
    join_response,
    leave_response,
    sync_response,
)
from protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)

_CONSUMER = "consumer"


class ClassicMembers:
    def __init__(self, consumer: ConsumerGroups, config: GroupConfig, timer: Timer):
        self.consumer = consumer
        self.config = config
        self.timer = timer

    # ------------------------------------------------------------ JoinGroup

    def join(self, ctx: RequestContext, request: JoinGroupRequest, group: ConsumerGroup) -> Result:
        version = ctx.api_version
        group_id = group.group_id
        if self.config.consumer_migration_policy == "disabled":
            raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                           f"Cannot join the consumer group {group_id} with the classic protocol because the "
                           f"group migration is disabled.")
        cfg = self.config
        if not cfg.min_session_timeout_ms <= request.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise ApiError(ErrorCode.INVALID_SESSION_TIMEOUT, f"session timeout {request.session_timeout_ms} ms")
        image = self.consumer.loaded_topics()
        member_id = request.member_id
        unknown = member_id == ""
        if unknown:
            member_id = self.consumer.new_member_id(ctx.client_id or _CONSUMER)
        instance_id = request.group_instance_id if version >= 5 else None
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        if not group.supports_classic_protocols(request.protocol_type, [name for name, _ in protocols]):
            raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")

        old, replaced = self._member_for_join(group, member_id, instance_id, unknown)
        if old is None and replaced is None:
            self.consumer.check_size(group)
        if unknown and instance_id is None and version >= 4:
            # KIP-394: the member rejoins with this id; nothing is kept until then.
            return Result(response=join_response(version, JoinAnswer(ErrorCode.MEMBER_ID_REQUIRED, member_id)))
        try:
            subscription = decode_subscription(protocols[0][1])
        except MalformedProtocol:
            raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                           "Malformed embedded consumer protocol in subscription deserialization.") from None

        base = old or ConsumerGroupMember(member_id)
        if replaced is not None:
            base = successor_of(replaced, member_id)
        rebalance_timeout_ms = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
        updated = replace(
            base, instance_id=instance_id, rack_id=getattr(subscription, "rack_id", None) or base.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            subscribed_topic_regex=None, client_id=ctx.client_id, client_host=ctx.client_host,
            classic=ClassicMemberMetadata(request.session_timeout_ms, protocols))
        records: list = []
        reconciled, _ = self.consumer.advance(group, image, old, base, updated, replaced,
                                              owned_partitions(subscription, image), records)
        answer = join_response(version, JoinAnswer(ErrorCode.NONE, member_id, reconciled.member_epoch, _CONSUMER,
                                                   protocols[0][0]))
        if (replaced is not None and not replaced.uses_classic_protocol and self.consumer.downgrade is not None
                and self.consumer.may_downgrade(group, {replaced.member_id}, reconciled)):
            # It replaced the last consumer-protocol member: the group becomes classic,
            # its members assigned the group's target as it stood before this request. A
            # classic rebalance follows when that target is not the group epoch's (a new
            # subscription, or members gone since it was computed: Kafka's rule), or a
            # member is not at it yet (waiting for partitions, say), which its heartbeats
            # in a Stable classic group would never tell it. Else the member takes its
            # predecessor's assignment as it is.
            for mid in (*group.members, member_id):
                self.consumer.cancel_timers(group_id, mid)
            bumped = any(isinstance(r.key, ConsumerGroupMetadataKey) for r in records)
            stale = bumped or group.assignment_epoch < group.group_epoch
            behind = any(m.state is not MemberState.STABLE or m.member_epoch != group.group_epoch
                         for mid, m in group.members.items() if mid != replaced.member_id)
            downgraded = self.consumer.downgrade(group, set(), succession=(reconciled, replaced),
                                                 rebalance=stale or behind)
            return replace(downgraded, records=(*records, *downgraded.records), response=answer)
        self.timer.cancel(classic_join_key(group_id, member_id))
        self.timer.schedule(classic_sync_key(group_id, member_id), rebalance_timeout_ms,
                            functools.partial(self._expired, group_id, member_id, "did not sync"))
        return Result(records=tuple(records), response=answer)

    @staticmethod
    def _member_for_join(group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool
                         ) -> tuple[ConsumerGroupMember | None, ConsumerGroupMember | None]:
        """(the member as it is, a static member it replaces)."""
        if instance_id is None:
            # An id the group does not know joins as a new member, as in Kafka: it may be
            # the one MEMBER_ID_REQUIRED gave out, or one from before an upgrade.
            return group.members.get(member_id), None
        holder_id = group.static_members.get(instance_id)
        if unknown:
            if holder_id is None:
                return None, None
            holder = group.members[holder_id]
            # A classic static member replaces its predecessor at once (the old process is
            # fenced); a consumer-protocol one only once it left temporarily (epoch -2).
            if holder.member_epoch != STATIC_LEAVE_EPOCH and not holder.uses_classic_protocol:
                raise ApiError(ErrorCode.UNRELEASED_INSTANCE_ID,
                               f"Static member {holder_id} with instance id {instance_id} is present in the "
                               f"consumer group.")
            return None, holder
        check_static_holder(group, instance_id, member_id)
        return group.members[member_id], None

    # ------------------------------------------------------------ SyncGroup and Heartbeat

    def sync(self, ctx: RequestContext, request: SyncGroupRequest, group: ConsumerGroup) -> Result:
        version = ctx.api_version
        member = self._classic_member(group, request.member_id, request.group_instance_id if version >= 3 else None,
                                      request.generation_id)
        assert member.classic is not None           # what `_classic_member` returns
        name = member.classic.supported_protocols[0][0]
        protocol_type = request.protocol_type if version >= 5 else None
        protocol_name = request.protocol_name if version >= 5 else None
        if (protocol_type is not None and protocol_type != _CONSUMER) or (
                protocol_name is not None and protocol_name != name):
            raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                           f"The protocol of member {member.member_id}'s SyncGroup ({protocol_type}, "
                           f"{protocol_name}) is not the one of its JoinGroup ({_CONSUMER}, {name}).")
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._expect_rejoin(group.group_id, member)
            raise ApiError(ErrorCode.REBALANCE_IN_PROGRESS,
                           f"A new rebalance is triggered in group {group.group_id} and member {member.member_id} "
                           f"should rejoin to catch up.")
        self.timer.cancel(classic_sync_key(group.group_id, member.member_id))
        self.consumer.schedule_session(group.group_id, member)
        assignment = encode_assignment(member.assigned, self.consumer.topics(),
                                       subscription_version(member.classic.supported_protocols[0][1]))
        return Result(response=sync_response(version, SyncAnswer(ErrorCode.NONE, _CONSUMER, name, assignment)))

    def heartbeat(self, ctx: RequestContext, request: HeartbeatRequest, group: ConsumerGroup) -> Result:
        member = self._classic_member(group, request.member_id,
                                      request.group_instance_id if ctx.api_version >= 3 else None,
                                      request.generation_id)
        self.consumer.schedule_session(group.group_id, member)
        error = ErrorCode.NONE
        # Against the group epoch, not the assignment epoch (as Kafka 4.3+ does, whose
        # assignor may run in the background): here a target is computed only when a
        # member's request asks, so with only classic members left nobody else would.
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS and not _waits_for_others(group, member))):
            error = ErrorCode.REBALANCE_IN_PROGRESS
            self._expect_rejoin(group.group_id, member)
        return Result(response=heartbeat_response(ctx.api_version, error))

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation: int) -> ConsumerGroupMember:
        if instance_id is not None:
            check_static_holder(group, instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or not member.uses_classic_protocol:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                           f"Member {member_id} is not a classic member of group {group.group_id}.")
        if generation != member.member_epoch:
            raise ApiError(ErrorCode.ILLEGAL_GENERATION,
                           f"The request generation id {generation} is not equal to the member epoch "
                           f"{member.member_epoch} of member {member_id}.")
        return member

    def _expect_rejoin(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = classic_join_key(group_id, member.member_id)
        if not self.timer.is_scheduled(key):
            self.timer.schedule(key, max(member.rebalance_timeout_ms, 0),
                                functools.partial(self._expired, group_id, member.member_id, "did not rejoin"))

    def _expired(self, group_id: str, member_id: str, what: str) -> Result:
        group = self.consumer.groups.get(group_id)
        if group is None or member_id not in group.members:
            return EMPTY_RESULT
        log.info("[group=%s] classic member %s fenced: it %s within its rebalance timeout", group_id, member_id, what)
        return self.consumer.fence(group, [member_id])

    # ------------------------------------------------------------ LeaveGroup

    def leave(self, ctx: RequestContext, request: LeaveGroupRequest, group: ConsumerGroup) -> Result:
        version = ctx.api_version
        leaving: list[tuple[str, str | None]]
        if version <= 2:
            leaving = [(request.member_id, None)]
        else:
            leaving = [(x.member_id, x.group_instance_id) for x in request.members]
        outcomes: list[tuple[str, str | None, ErrorCode]] = []
        gone: list[str] = []
        for member_id, instance_id in leaving:
            found: str | None
            if instance_id is None:
                found = member_id if member_id in group.members else None
            else:
                found = group.static_members.get(instance_id)
            if found is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif instance_id is not None and member_id not in ("", found):
                error = ErrorCode.FENCED_INSTANCE_ID
            else:
                error = ErrorCode.NONE
                log.info("[group=%s] member %s left through LeaveGroup", group.group_id, found)
                gone.append(found)
            outcomes.append((member_id, instance_id, error))
        return replace(self.consumer.fence(group, gone),
                       response=leave_response(version, ErrorCode.NONE, outcomes))


def _waits_for_others(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's `waitingOnUnreleasedPartition`: a target partition it lacks is still held by another member."""
    for topic_id, partitions in group.target.get(member.member_id, {}).items():
        held = member.assigned.get(topic_id, frozenset())
        for p in partitions - held:
            if group.owners.get((topic_id, p)) not in (None, member.member_id):
                return True
    return False
