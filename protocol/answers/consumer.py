"""The KIP-848 consumer group protocol's answers: ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage

from protocol.answers.common import AUTHORIZED_OPERATIONS_OMITTED_INT32, requested
from protocol.consumer_group_messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse


def consumer_group_heartbeat_error(api: Any, version: int, request: Any, code: int,
                                   message: str | None) -> ApiMessage:
    return ConsumerGroupHeartbeatResponse(version=version, throttle_time_ms=0, error_code=code,
                                          error_message=message, member_id=None, member_epoch=-1,
                                          heartbeat_interval_ms=0, assignment=None)


def consumer_group_describe_error(api: Any, version: int, request: Any, code: int,
                                  message: str | None) -> ApiMessage:
    group_ids = requested(request, api, version, "group").group_ids
    return ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0, groups=[
        ConsumerGroupDescribeResponse.DescribedGroup(
            version=version, error_code=code, error_message=message, group_id=group_id, group_state="",
            group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED_INT32)
        for group_id in group_ids])
