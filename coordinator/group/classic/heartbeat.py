"""Heartbeat (API 12) and LeaveGroup (API 13) for classic groups."""

from __future__ import annotations

import functools
import logging

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import HeartbeatRequest, LeaveGroupRequest

from coordinator.common.result import EMPTY_RESULT, Result
from coordinator.group.classic.manager import Membership
from coordinator.group.classic.state import GroupState
from coordinator.group.context import RequestContext
from coordinator.group.timer import heartbeat_key
from protocol.answers.classic import heartbeat_response, leave_response
from protocol.api_keys import LOCAL_VERSIONS
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def heartbeat(membership: Membership, ctx: RequestContext, request: HeartbeatRequest) -> Result:
    version = ctx.api_version
    group_id, member_id = request.group_id, request.member_id
    if group_id == "":
        return _answer(version, group_id, member_id, ErrorCode.INVALID_GROUP_ID, "empty group id")
    group = membership.groups.get(group_id)
    if group is None:
        return _answer(version, group_id, member_id, ErrorCode.UNKNOWN_MEMBER_ID, "no such group")
    if group.state is GroupState.DEAD:
        return _answer(version, group_id, member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, "group is dead")
    error = group.validate_member(member_id, request.group_instance_id if version >= 3 else None)
    if error is not ErrorCode.NONE:
        return _answer(version, group_id, member_id, error, "member validation failed")
    if request.generation_id != group.generation:
        return _answer(version, group_id, member_id, ErrorCode.ILLEGAL_GENERATION,
                       f"generation {request.generation_id} != {group.generation}")
    match group.state:
        case GroupState.EMPTY:
            return _answer(version, group_id, member_id, ErrorCode.UNKNOWN_MEMBER_ID, "group is empty")
        case GroupState.PREPARING_REBALANCE:
            # The session stays alive; the member must rejoin.
            membership.reschedule_heartbeat(group, group.member(member_id))
            return _answer(version, group_id, member_id, ErrorCode.REBALANCE_IN_PROGRESS, "group is rebalancing")
        case _:
            # Heartbeats may start right after the JoinGroup answer, in CompletingRebalance.
            membership.reschedule_heartbeat(group, group.member(member_id))
            return _ANSWERED[version]


def _answer(version: int, group_id: str, member_id: str, error: ErrorCode, reason: str) -> Result:
    log.debug("[group=%s] Heartbeat from %r answered %s: %s", group_id, member_id, error.name, reason)
    return _result(version, error)


@functools.cache
def _result(version: int, error: ErrorCode) -> Result:
    # A Heartbeat answer is its version and error code only: build each once, not per
    # request (building one per request showed in the profile: docs/benchmarks/notes.md, "Heartbeat
    # request path"). Nothing mutates a response after its handler returns it.
    return Result(response=heartbeat_response(version, error))


def leave_group(membership: Membership, ctx: RequestContext, request: LeaveGroupRequest) -> Result:
    version = ctx.api_version
    group_id = request.group_id
    leaving: list[tuple[str, str | None, str | None]]
    if version <= 2:
        leaving = [(request.member_id, None, None)]
    else:
        leaving = [(x.member_id, x.group_instance_id, x.reason if version >= 5 else None)
                   for x in request.members]

    def refuse_all(error: ErrorCode, reason: str) -> Result:
        log.debug("[group=%s] LeaveGroup refused with %s: %s", group_id, error.name, reason)
        return Result(response=leave_response(version, error, []))

    if group_id == "":
        return refuse_all(ErrorCode.INVALID_GROUP_ID, "empty group id")
    group = membership.groups.get(group_id)
    if group is None:
        log.debug("[group=%s] LeaveGroup for an unknown group", group_id)
        return Result(response=leave_response(version, ErrorCode.NONE, [
            (mid, iid, ErrorCode.UNKNOWN_MEMBER_ID) for mid, iid, _ in leaving]))
    if group.is_in(GroupState.DEAD):
        return refuse_all(ErrorCode.COORDINATOR_NOT_AVAILABLE, "group is dead")

    outcomes: list[tuple[str, str | None, ErrorCode]] = []
    for member_id, instance_id, reason in leaving:
        reason = reason or "not provided"
        if member_id == "":
            # Admin removal by instance id (KIP-345): no member id.
            if instance_id is not None and group.has_static_member(instance_id):
                membership.remove_current_member(group, group.static_members[instance_id], reason)
                outcomes.append((member_id, instance_id, ErrorCode.NONE))
            else:
                log.debug("[group=%s] LeaveGroup: unknown instance id %r", group_id, instance_id)
                outcomes.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_pending_member(member_id):
            group.remove(member_id)
            membership.timer.cancel(heartbeat_key(group_id, member_id))
            log.info("[group=%s] pending member %s left (reason: %s)", group_id, member_id, reason)
            outcomes.append((member_id, instance_id, ErrorCode.NONE))
        else:
            error = group.validate_member(member_id, instance_id)
            if error is ErrorCode.NONE:
                membership.remove_current_member(group, member_id, reason)
            else:
                log.debug("[group=%s] LeaveGroup of %r refused with %s", group_id, member_id, error.name)
            outcomes.append((member_id, instance_id, error))

    result = EMPTY_RESULT
    left = [mid for mid, _, e in outcomes if e is ErrorCode.NONE]
    if left:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            result = membership.maybe_prepare_rebalance_or_complete_join(group, f"members {left} left")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            result = membership.maybe_complete_join_phase(group)
    return membership.finish(result, response=leave_response(version, ErrorCode.NONE, outcomes))

# Keyed by a plain int: hashing an ErrorCode (an IntEnum) runs Python code.
_ANSWERED = {version: _result(version, ErrorCode.NONE) for version in range(LOCAL_VERSIONS[ApiKey.Heartbeat][1] + 1)}
