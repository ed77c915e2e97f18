"""The coordinator's own view of a KIP-848 consumer group: ConsumerGroupDescribe, which lists
every partition a member holds, the ones it is still revoking included."""

from __future__ import annotations

from coordinator.probe import request_response
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse


def describe(bootstrap: str, group: str):
    host, port = bootstrap.rsplit(":", 1)
    response = request_response((host, int(port)), ConsumerGroupDescribeRequest[1](
        group_ids=[group], include_authorized_operations=False), ConsumerGroupDescribeResponse)
    return response.groups[0]


def held(group) -> dict[str, list[int]]:
    """member id -> partitions it holds (assigned or revoking), as the coordinator says."""
    return {m.member_id: sorted(p for t in m.assignment.topic_partitions for p in t.partitions) for m in group.members}
