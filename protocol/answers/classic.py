"""The classic group protocol's answers: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

A parked JoinGroup or SyncGroup is answered at the version it was sent with, possibly by
another member's request, so the state machine decides an answer first (`JoinAnswer`,
`SyncAnswer`) and shapes it at the parked request's version here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from protocol.answers.common import UNKNOWN_GENERATION_ID
from protocol.errors import ErrorCode


def join_group_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    # v7+: protocol_name is nullable and an error carries null; before, "" (JoinGroupRequest.java)
    return JoinGroupResponse(version=version, throttle_time_ms=0, error_code=code,
                             generation_id=UNKNOWN_GENERATION_ID, protocol_type=None,
                             protocol_name=None if version >= 7 else "", leader="", skip_assignment=False,
                             member_id="", members=[])


def heartbeat_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=code)


def leave_group_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    members = []
    if version >= 3 and request is not None:
        members = [LeaveGroupResponse.MemberResponse(version=version, member_id=member.member_id,
                                                     group_instance_id=member.group_instance_id, error_code=code)
                   for member in request.members]
    return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=code, members=members)


def sync_group_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return SyncGroupResponse(version=version, throttle_time_ms=0, error_code=code, protocol_type=None,
                             protocol_name=None, assignment=b"")


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    skip_assignment: bool = False
    members: tuple[tuple[str, str | None, bytes], ...] = ()   # (member_id, group_instance_id, metadata)


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def join_response(version: int, a: JoinAnswer) -> JoinGroupResponse:
    kw: dict = {}
    if version >= 7:
        kw["protocol_type"] = a.protocol_type
        kw["protocol_name"] = a.protocol_name
    else:
        # v0-6: ProtocolName is not nullable; Kafka sends "" for none.
        kw["protocol_name"] = a.protocol_name or ""
    if version >= 9:
        kw["skip_assignment"] = a.skip_assignment
    member_cls = JoinGroupResponse.JoinGroupResponseMember
    members = [member_cls(member_id=m, group_instance_id=i, metadata=md) if version >= 5
               else member_cls(member_id=m, metadata=md) for m, i, md in a.members]
    return JoinGroupResponse(version=version, error_code=int(a.error), generation_id=a.generation_id,
                             leader=a.leader or "", member_id=a.member_id, members=members, **kw)


def sync_response(version: int, a: SyncAnswer) -> SyncGroupResponse:
    kw: dict = {}
    if version >= 5:
        kw["protocol_type"] = a.protocol_type
        kw["protocol_name"] = a.protocol_name
    return SyncGroupResponse(version=version, error_code=int(a.error), assignment=a.assignment, **kw)


def heartbeat_response(version: int, error: ErrorCode) -> HeartbeatResponse:
    return HeartbeatResponse(version=version, error_code=int(error))


def leave_response(version: int, error: ErrorCode,
                   members: list[tuple[str, str | None, ErrorCode]]) -> LeaveGroupResponse:
    if version <= 2:
        # v0-2 carry one member; its error is folded into the top-level code.
        folded = error if error is not ErrorCode.NONE else next(
            (e for _, _, e in members if e is not ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(version=version, error_code=int(folded))
    member_cls = LeaveGroupResponse.MemberResponse
    return LeaveGroupResponse(version=version, error_code=int(error), members=[
        member_cls(member_id=m, group_instance_id=i, error_code=int(e)) for m, i, e in members])
