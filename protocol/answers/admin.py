"""DescribeGroups, ListGroups and DeleteGroups: the admin client's view of groups."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.api_message import ApiMessage

from protocol.answers.common import AUTHORIZED_OPERATIONS_OMITTED, requested
from protocol.errors import ErrorCode


def described_group(version: int, group_id: str | None, outcome: Any) -> Any:
    """One group's entry; `outcome` is its `coordinator.group.views.GroupDescription`, or the
    `ErrorCode` its partition failed with. A null `group_id` (a request built by hand; the
    wire decoder refuses it) is refused before routing, and answered as sent."""
    if isinstance(outcome, ErrorCode):
        return described_group_error(version, group_id, outcome)
    group_cls = DescribeGroupsResponse.DescribedGroup
    member_cls = group_cls.DescribedGroupMember
    return group_cls(
        version=version, error_code=outcome.error, error_message=outcome.error_message, group_id=group_id,
        group_state=outcome.state, protocol_type=outcome.protocol_type, protocol_data=outcome.protocol_data,
        members=[member_cls(version=version, member_id=m.member_id, group_instance_id=m.group_instance_id,
                            client_id=m.client_id, client_host=m.client_host, member_metadata=m.member_metadata,
                            member_assignment=m.member_assignment) for m in outcome.members],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def described_group_error(version: int, group_id: str | None, code: int, message: str | None = None) -> Any:
    """`group_id` is None for a request built by hand with a null id: answered as sent."""
    return DescribeGroupsResponse.DescribedGroup(
        version=version, error_code=code, error_message=message, group_id=group_id, group_state="",
        protocol_type="", protocol_data="", members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def describe_groups_response(version: int, groups: list[Any]) -> ApiMessage:
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=groups)


def describe_groups_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    group_ids = requested(request, api, version, "group").groups
    return describe_groups_response(version, [described_group_error(version, group_id, code, message)
                                              for group_id in group_ids])


def listed_group(version: int, listing: Any) -> Any:
    """One group of a listing (`coordinator.group.views.GroupListing`)."""
    return ListGroupsResponse.ListedGroup(version=version, group_id=listing.group_id,
                                          protocol_type=listing.protocol_type, group_state=listing.group_state,
                                          group_type=listing.group_type)


def list_groups_response(version: int, groups: list[Any], code: int = ErrorCode.NONE) -> ApiMessage:
    return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=code, groups=groups)


def list_groups_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    return list_groups_response(version, [], code)


def deleted_group(version: int, group_id: str | None, code: int) -> Any:
    return DeleteGroupsResponse.DeletableGroupResult(version=version, group_id=group_id, error_code=code)


def delete_groups_response(version: int, results: list[Any]) -> ApiMessage:
    return DeleteGroupsResponse(version=version, throttle_time_ms=0, results=results)


def delete_groups_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    group_ids = requested(request, api, version, "group").groups_names
    return delete_groups_response(version, [deleted_group(version, group_id, code) for group_id in group_ids])
