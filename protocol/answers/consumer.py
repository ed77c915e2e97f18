"""The KIP-848 consumer group protocol's answers: ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_message import ApiMessage

from protocol.answers.common import AUTHORIZED_OPERATIONS_OMITTED_INT32, requested
from protocol.consumer_group_messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse


def consumer_group_heartbeat_response(version: int, member_id: str, member_epoch: int, heartbeat_interval_ms: int,
                                      assignment: Iterable[tuple[uuid.UUID, Iterable[int]]] | None) -> ApiMessage:
    """`assignment`: the member's partitions by topic id, or None to leave them unsaid
    (a member is told only when they change, or when it asks with its full state)."""
    wire = None
    if assignment is not None:
        cls = ConsumerGroupHeartbeatResponse.Assignment
        wire = cls(version=version, topic_partitions=[
            cls.TopicPartitions(version=version, topic_id=topic_id, partitions=list(partitions))
            for topic_id, partitions in assignment])
    return ConsumerGroupHeartbeatResponse(version=version, throttle_time_ms=0, error_code=0, error_message=None,
                                          member_id=member_id, member_epoch=member_epoch,
                                          heartbeat_interval_ms=heartbeat_interval_ms, assignment=wire)


def consumer_group_heartbeat_error(api: Any, version: int, request: Any, code: int,
                                   message: str | None) -> ApiMessage:
    return ConsumerGroupHeartbeatResponse(version=version, throttle_time_ms=0, error_code=code,
                                          error_message=message, member_id=None, member_epoch=-1,
                                          heartbeat_interval_ms=0, assignment=None)


_CLASSIC_MEMBER_TYPE, _CONSUMER_MEMBER_TYPE = 0, 1     # ConsumerGroupDescribe v1's MemberType


def described_consumer_group(version: int, group_id: str, state: str, group_epoch: int, assignment_epoch: int,
                             assignor_name: str, members: list[Any]) -> Any:
    """One group's entry (`coordinator/group/consumer/describe.py` reads the group)."""
    return ConsumerGroupDescribeResponse.DescribedGroup(
        version=version, error_code=0, error_message=None, group_id=group_id, group_state=state,
        group_epoch=group_epoch, assignment_epoch=assignment_epoch, assignor_name=assignor_name, members=members,
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED_INT32)


def described_consumer_member(version: int, member: Any, assignment: Any, target_assignment: Any) -> Any:
    """`member`: a `coordinator.group.consumer.group.ConsumerGroupMember`; the assignments
    from `described_assignment`."""
    return ConsumerGroupDescribeResponse.DescribedGroup.Member(
        version=version, member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
        member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex, assignment=assignment,
        target_assignment=target_assignment,
        member_type=_CLASSIC_MEMBER_TYPE if member.uses_classic_protocol else _CONSUMER_MEMBER_TYPE)


def described_assignment(version: int, topics: Iterable[tuple[uuid.UUID, str, Iterable[int]]]) -> Any:
    """A member's partitions as (topic id, topic name, partitions)."""
    cls = ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment
    return cls(version=version, topic_partitions=[
        cls.TopicPartitions(version=version, topic_id=topic_id, topic_name=name, partitions=list(partitions))
        for topic_id, name, partitions in topics])


def described_consumer_group_error(version: int, group_id: str, code: int, message: str | None = None,
                                   state: str = "") -> Any:
    return ConsumerGroupDescribeResponse.DescribedGroup(
        version=version, error_code=int(code), error_message=message, group_id=group_id, group_state=state,
        group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED_INT32)


def consumer_group_describe_response(version: int, groups: list[Any]) -> ApiMessage:
    return ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0, groups=groups)


def consumer_group_describe_error(api: Any, version: int, request: Any, code: int,
                                  message: str | None) -> ApiMessage:
    group_ids = requested(request, api, version, "group").group_ids
    return consumer_group_describe_response(version, [described_consumer_group_error(version, group_id, code, message)
                                                      for group_id in group_ids])
