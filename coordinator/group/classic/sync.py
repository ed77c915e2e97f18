"""SyncGroup (API 14) for classic groups.

Followers park until the leader's assignment is durable. The leader's SyncGroup writes
a GroupMetadata snapshot holding every member's assignment (missing ones as empty
bytes); only after that write commits does `after_commit` re-check that the group is
still CompletingRebalance in the same generation (another member may have joined
meanwhile), store the assignments, answer every parked SyncGroup and move to Stable.
"""

from __future__ import annotations

import logging

from kafka.protocol.consumer.group import SyncGroupRequest

from coordinator.common.result import EMPTY_RESULT, ReplyHandle, Result
from coordinator.group.classic.group import Parked
from coordinator.group.classic.manager import Membership
from coordinator.group.classic.state import GroupState
from coordinator.group.context import RequestContext
from protocol.answers.classic import SyncAnswer, sync_response
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def sync_group(membership: Membership, ctx: RequestContext, request: SyncGroupRequest, handle: ReplyHandle) -> Result:
    version = ctx.api_version
    group_id, member_id = request.group_id, request.member_id

    def refuse(error: ErrorCode, reason: str) -> Result:
        log.debug("[group=%s] SyncGroup from %r refused with %s: %s", group_id, member_id, error.name, reason)
        return membership.finish(response=sync_response(version, SyncAnswer(error)))

    if group_id == "":
        return refuse(ErrorCode.INVALID_GROUP_ID, "empty group id")
    protocol_type = request.protocol_type if version >= 5 else None
    protocol_name = request.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        # KIP-559: v5+ must name the protocol type and name it synced for.
        return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "v5+ without protocol type or name")
    group = membership.groups.get(group_id)
    if group is None:
        return refuse(ErrorCode.UNKNOWN_MEMBER_ID, "no such group")
    if group.is_empty():
        return refuse(ErrorCode.UNKNOWN_MEMBER_ID, "group is empty")
    if group.is_in(GroupState.DEAD):
        return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE, "group is dead")
    error = group.validate_member(member_id, request.group_instance_id if version >= 3 else None)
    if error is not ErrorCode.NONE:
        return refuse(error, "member validation failed")
    if request.generation_id != group.generation:
        return refuse(ErrorCode.ILLEGAL_GENERATION, f"generation {request.generation_id} != {group.generation}")
    if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
        return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol differs from the group's")
    if group.is_in(GroupState.PREPARING_REBALANCE):
        return refuse(ErrorCode.REBALANCE_IN_PROGRESS, "group is rebalancing")

    member = group.member(member_id)
    if group.is_in(GroupState.STABLE):
        membership.remove_pending_sync_member(group, member_id)
        return membership.finish(response=sync_response(version, SyncAnswer(
            ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)))

    assert group.is_in(GroupState.COMPLETING_REBALANCE)
    if member.awaiting_sync is not None:
        membership.answer_superseded(member.awaiting_sync.handle, sync_response(
            member.awaiting_sync.api_version, SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)))
    member.awaiting_sync = Parked(handle, version)
    membership.remove_pending_sync_member(group, member_id)
    if not group.is_leader(member_id):
        return membership.finish()

    assignment = {a.member_id: bytes(a.assignment) for a in request.assignments}
    missing = [mid for mid in group.members if mid not in assignment]
    for mid in missing:
        assignment[mid] = b""
    if missing:
        log.warning("[group=%s] leader sent no assignment for %s in generation %d; they get an empty one",
                    group_id, missing, group.generation)
    log.info("[group=%s] assignment received from leader %s for generation %d", group_id, member_id,
             group.generation)
    generation = group.generation

    def after_commit() -> Result:
        if membership.groups.get(group_id) is not group or not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation != generation:
            log.debug("[group=%s] assignment of generation %d committed after the group moved on",
                      group_id, generation)
            return EMPTY_RESULT
        for x in group.members.values():
            x.assignment = assignment.get(x.member_id, b"")
        membership.propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE, membership.clock())
        log.info("[group=%s] stable at generation %d", group_id, generation)
        return membership.finish()

    record = membership.snapshot_record(group, assignment, ctx, member_id)
    return membership.finish(Result(records=record.records, after_commit=after_commit, replay=False))


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
