"""JoinGroup (API 11) for classic groups.

Paths, as in Kafka's `classicGroupJoin*`:
- new dynamic member, v4+: a member id is generated and parked as *pending*; the answer
  is MEMBER_ID_REQUIRED with that id (KIP-394); the pending id lives for the request's
  session timeout. Before v4 the member is added at once.
- new static member (KIP-345): added, or, if its instance id is known, it *replaces*
  the old member id (the old process is fenced with FENCED_INSTANCE_ID). In Stable with
  an unchanged protocol that needs no rebalance: a GroupMetadata snapshot is written and
  the joiner is answered once it is durable.
- existing member: rejoins the rebalance, or gets the current generation back when
  nothing changed.

A brand-new group: Kafka writes an *empty* GroupMetadata record (generation 0, no
protocol type) when the join itself writes nothing, so the group exists in the log from
its first request. We do the same: the log then matches Kafka's, a group that only ever
reached MEMBER_ID_REQUIRED survives a restart as Empty (as on Kafka), and the offsets
expiry deletes it later like any empty group without offsets.
"""

from __future__ import annotations

import logging

from kafka.protocol.consumer.group import JoinGroupRequest

from coordinator.common.result import EMPTY_RESULT, ReplyHandle, Result
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember, Parked, Protocols
from coordinator.group.classic.manager import Membership
from coordinator.group.classic.state import GroupState
from coordinator.group.context import RequestContext
from coordinator.records import new_empty_group_metadata_record
from protocol.answers.classic import JoinAnswer, SyncAnswer, join_response, sync_response
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def join_group(membership: Membership, ctx: RequestContext, request: JoinGroupRequest, handle: ReplyHandle) -> Result:
    version = ctx.api_version
    group_id, member_id = request.group_id, request.member_id

    def refuse(error: ErrorCode, reason: str, answer_member_id: str = member_id) -> Result:
        log.debug("[group=%s] JoinGroup from %r refused with %s: %s", group_id, member_id, error.name, reason)
        return membership.finish(response=join_response(version, JoinAnswer(error, answer_member_id)))

    if group_id == "":
        return refuse(ErrorCode.INVALID_GROUP_ID, "empty group id")
    cfg = membership.config
    if not cfg.min_session_timeout_ms <= request.session_timeout_ms <= cfg.max_session_timeout_ms:
        return refuse(ErrorCode.INVALID_SESSION_TIMEOUT, f"session timeout {request.session_timeout_ms} ms")

    is_unknown_member = member_id == ""
    group = membership.groups.get(group_id)
    is_new_group = group is None
    if group is None:
        if not is_unknown_member:
            return refuse(ErrorCode.UNKNOWN_MEMBER_ID, "member id given but the group does not exist")
        group = ClassicGroup(group_id, GroupState.EMPTY, membership.clock())
        membership.groups[group_id] = group

    join = _Join(membership, ctx, request, handle, group)
    if not _accept_joining_member(group, member_id, cfg.group_max_size):
        group.remove(member_id)
        result = join.answer_now(JoinAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED), "group.max.size reached")
    elif is_unknown_member:
        result = join.new_member()
    else:
        result = join.existing_member()

    if is_new_group and not result.records:
        result = Result(records=(new_empty_group_metadata_record(group_id, "", group.current_state_timestamp_ms,
                                                                 member_id=member_id, client_id=ctx.client_id,
                                                                 client_host=ctx.client_host),),
                        response=result.response, replies=result.replies, replay=False)
    return result


def _accept_joining_member(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    if group.is_in(GroupState.EMPTY, GroupState.DEAD):
        return True
    if group.is_in(GroupState.PREPARING_REBALANCE):
        # Counting members awaiting join (not members) kicks the last rejoiners when the
        # limit was lowered, and stays right if the group is already over it.
        member = group.members.get(member_id)
        return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
    return group.has_member(member_id) or len(group.members) < max_size


class _Join:
    """One JoinGroup request being decided."""

    def __init__(self, membership: Membership, ctx: RequestContext, request: JoinGroupRequest, handle: ReplyHandle,
                 group: ClassicGroup):
        self.membership = membership
        self.ctx = ctx
        self.request = request
        self.group = group
        self.parked = Parked(handle, ctx.api_version)
        self.protocols: Protocols = tuple((p.name, bytes(p.metadata)) for p in request.protocols)
        # v0 has no rebalance timeout: the session timeout stands in (JoinGroupRequest.java).
        self.rebalance_timeout_ms = (request.session_timeout_ms if ctx.api_version == 0
                                     else request.rebalance_timeout_ms)
        self.group_instance_id = request.group_instance_id if ctx.api_version >= 5 else None
        self.reason = (request.reason if ctx.api_version >= 8 else None) or "not provided"

    def answer_now(self, answer: JoinAnswer, reason: str) -> Result:
        if answer.error is not ErrorCode.NONE:
            log.debug("[group=%s] JoinGroup from %r answered %s: %s", self.group.group_id,
                      self.request.member_id, answer.error.name, reason)
        return self.membership.finish(response=join_response(self.ctx.api_version, answer))

    def supports_protocols(self) -> bool:
        return self.group.supports_protocols(self.request.protocol_type, [n for n, _ in self.protocols])

    # ------------------------------------------------------------ new members

    def new_member(self) -> Result:
        group = self.group
        if group.is_in(GroupState.DEAD):
            return self.answer_now(JoinAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE), "group is dead")
        if not self.supports_protocols():
            return self.answer_now(JoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
                                   "protocol type or protocols not supported by the group")
        # Static members get ids from their instance id, dynamic ones from their client id.
        new_member_id = self.membership.new_member_id(self.group_instance_id or self.ctx.client_id)
        if self.group_instance_id is not None:
            old_member_id = group.static_member_id(self.group_instance_id)
            if old_member_id is not None:
                log.info("[group=%s] static member %s rejoins with a new member id %s (was %s) in %s",
                         group.group_id, self.group_instance_id, new_member_id, old_member_id, group.state.value)
                return self.replace_static_member(old_member_id, new_member_id)
            return self.add_member(new_member_id)
        if self.ctx.api_version >= 4:
            # KIP-394: hand out the id first; the member proves it is alive by rejoining with it.
            group.add_pending_member(new_member_id)
            self.membership.schedule_pending_member_expiry(group, new_member_id, self.request.session_timeout_ms)
            log.info("[group=%s] new dynamic member gets id %s and must rejoin with it",
                     group.group_id, new_member_id)
            return self.membership.finish(response=join_response(
                self.ctx.api_version, JoinAnswer(ErrorCode.MEMBER_ID_REQUIRED, new_member_id)))
        return self.add_member(new_member_id)

    def add_member(self, member_id: str) -> Result:
        group, membership = self.group, self.membership
        member = ClassicGroupMember(member_id, self.group_instance_id, self.ctx.client_id, self.ctx.client_host,
                                    self.rebalance_timeout_ms, self.request.session_timeout_ms,
                                    self.request.protocol_type, self.protocols)
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, self.parked)
        # Sockets are muted while a JoinGroup is parked, so a vanished client cannot be
        # detected; a new member's join times out instead, and a live client retries.
        membership.reschedule_heartbeat(group, member, membership.config.new_member_join_timeout_ms)
        log.info("[group=%s] member %s (instance %s) joins; reason: %s", group.group_id, member_id,
                 self.group_instance_id, self.reason)
        return membership.finish(membership.maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined"))

    def replace_static_member(self, old_member_id: str, new_member_id: str) -> Result:
        group, membership, instance_id = self.group, self.membership, self.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        old, member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        # Fence whoever still waits as the old member id.
        if old.awaiting_join is not None:
            membership.answer_superseded(old.awaiting_join.handle, join_response(old.awaiting_join.api_version, JoinAnswer(
                ErrorCode.FENCED_INSTANCE_ID, old_member_id)))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            membership.answer_superseded(old.awaiting_sync.handle, sync_response(
                old.awaiting_sync.api_version, SyncAnswer(ErrorCode.FENCED_INSTANCE_ID)))
            old.awaiting_sync = None
        # The old id's heartbeat timer will find no such member and do nothing.
        membership.reschedule_heartbeat(group, member)
        group.update_member(member, self.protocols, self.rebalance_timeout_ms, self.request.session_timeout_ms,
                            self.parked)

        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                log.info("[group=%s] static member %s replaced without a rebalance", group.group_id, instance_id)
                return self._persist_static_replacement(member, current_leader)
            return membership.finish(membership.maybe_prepare_rebalance_or_complete_join(
                group, f"static member {instance_id} rejoined with a protocol change"))
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold an assignment for the old member id: start over.
            return membership.finish(membership.prepare_rebalance(group, f"static member {instance_id} rejoined"))
        return membership.finish(membership.maybe_complete_join_phase(group))

    def _persist_static_replacement(self, member: ClassicGroupMember, current_leader: str | None) -> Result:
        group, membership = self.group, self.membership
        generation = group.generation
        new_member_id = member.member_id
        record = membership.snapshot_record(group, group.group_assignment(), self.ctx, new_member_id)
        skip_supported = self.ctx.api_version >= 9

        def after_commit() -> Result:
            # Re-check: a rebalance started meanwhile will answer the parked join itself.
            if membership.groups.get(group.group_id) is not group or not group.is_in(GroupState.STABLE) \
                    or group.generation != generation or group.members.get(new_member_id) is not member:
                return membership.finish(EMPTY_RESULT)
            if skip_supported:
                # v9+: a static leader keeps its assignment and gets the member list only to
                # know the group, with SkipAssignment so it does not recompute.
                is_leader = group.is_leader(new_member_id)
                members = tuple((x.member_id, x.group_instance_id, x.metadata(group.protocol_name))
                                for x in group.members.values()) if is_leader else ()
                answer = JoinAnswer(ErrorCode.NONE, new_member_id, group.generation, group.protocol_type,
                                    group.protocol_name, group.leader_id, is_leader, members)
            else:
                # Older clients would recompute an assignment if told they lead: show them the
                # previous leader id so that a returning leader acts as a follower.
                answer = JoinAnswer(ErrorCode.NONE, new_member_id, group.generation, group.protocol_type,
                                    group.protocol_name, current_leader)
            membership.answer_join(group, member, answer)
            return membership.finish(EMPTY_RESULT)

        return membership.finish(Result(records=record.records, after_commit=after_commit, replay=False))

    # ------------------------------------------------------------ existing members

    def existing_member(self) -> Result:
        group, member_id = self.group, self.request.member_id
        if group.is_in(GroupState.DEAD):
            return self.answer_now(JoinAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id), "group is dead")
        if not self.supports_protocols():
            return self.answer_now(JoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id),
                                   "protocol type or protocols not supported by the group")
        if group.is_pending_member(member_id):
            if self.group_instance_id is not None:
                raise ValueError(f"pending member {member_id} joined with instance id {self.group_instance_id}")
            log.info("[group=%s] pending member %s rejoins", group.group_id, member_id)
            return self.add_member(member_id)
        error = group.validate_member(member_id, self.group_instance_id)
        if error is not ErrorCode.NONE:
            return self.answer_now(JoinAnswer(error, member_id), "member validation failed")

        member = group.member(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self.update_member(member, f"member {member_id} rejoins during PreparingRebalance")
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(self.protocols):
                # A retry after a lost JoinGroup answer: this generation's answer again.
                return self.answer_now(self.current_generation(member, with_members=group.is_leader(member_id)), "")
            return self.update_member(member, f"member {member_id} changed its metadata")
        if group.is_in(GroupState.STABLE):
            if group.is_leader(member_id):
                # The leader rejoins to trigger a rebalance (e.g. topic metadata changed).
                return self.update_member(member, f"leader {member_id} rejoins")
            if not member.matches(self.protocols):
                return self.update_member(member, f"member {member_id} changed its metadata")
            return self.answer_now(self.current_generation(member, with_members=False), "")
        log.warning("[group=%s] member %s rejoins a group in state %s", group.group_id, member_id, group.state.value)
        return self.answer_now(JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id), "group is empty")

    def current_generation(self, member: ClassicGroupMember, with_members: bool) -> JoinAnswer:
        group = self.group
        members = tuple((x.member_id, x.group_instance_id, x.metadata(group.protocol_name))
                        for x in group.members.values()) if with_members else ()
        return JoinAnswer(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id, members=members)

    def update_member(self, member: ClassicGroupMember, reason: str) -> Result:
        group, membership = self.group, self.membership
        if member.awaiting_join is not None:
            membership.answer_superseded(member.awaiting_join.handle, join_response(
                member.awaiting_join.api_version, JoinAnswer(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)))
        group.update_member(member, self.protocols, self.rebalance_timeout_ms, self.request.session_timeout_ms,
                            self.parked)
        return membership.finish(membership.maybe_prepare_rebalance_or_complete_join(group, f"{reason}; client reason: {self.reason}"))

