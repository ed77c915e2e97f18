"""DescribeGroups, ListGroups and DeleteGroups: the admin client's view of groups."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.api_message import ApiMessage

from protocol.answers.common import AUTHORIZED_OPERATIONS_OMITTED, requested


def describe_groups_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    group_ids = requested(request, api, version, "group").groups
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=[
        DescribeGroupsResponse.DescribedGroup(
            version=version, error_code=code, error_message=message, group_id=group_id, group_state="",
            protocol_type="", protocol_data="", members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for group_id in group_ids])


def list_groups_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=code, groups=[])


def delete_groups_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    group_ids = requested(request, api, version, "group").groups_names
    return DeleteGroupsResponse(version=version, throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(version=version, group_id=group_id, error_code=code)
        for group_id in group_ids])
