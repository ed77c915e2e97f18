"""The classic group protocol's answers: JoinGroup, SyncGroup, Heartbeat, LeaveGroup."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from protocol.answers.common import UNKNOWN_GENERATION_ID


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
