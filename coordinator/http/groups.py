"""JSON views of a shard's groups for /v1/groups, read on the partition's executor.

Assignments of groups using the "consumer" protocol type are decoded
(ConsumerProtocolAssignment, read as v0, the prefix of every version) into
`{topic: [partitions]}`; anything else is shown as base64.
"""

from __future__ import annotations

import base64
from typing import Any

from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0

from coordinator.group.classic import ClassicGroup, ClassicGroupMember


def summary(group: ClassicGroup, partition: int) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "partition": partition,
        "state": group.state.value,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "generation": group.generation,
        "leader": group.leader_id,
        "members": len(group.members),
        "state_since_ms": group.current_state_timestamp_ms,
    }


def summaries(shard: Any) -> list[dict[str, Any]]:
    return [summary(g, shard.partition) for g in shard.groups.values()]


def detail(shard: Any, group_id: str) -> dict[str, Any] | None:
    group = shard.groups.get(group_id)
    if group is None:
        return None
    view = summary(group, shard.partition)
    view["members"] = [_member(group, m) for m in group.members.values()]
    view["offsets"] = {
        topic: {str(partition): {"offset": v.offset, "leader_epoch": v.leader_epoch, "metadata": v.metadata,
                                 "commit_timestamp_ms": v.commit_timestamp_ms,
                                 "expire_timestamp_ms": v.expire_timestamp_ms}
                for partition, v in sorted(by_partition.items())}
        for topic, by_partition in sorted(shard.offsets.committed.get(group_id, {}).items())
    }
    return view


def _member(group: ClassicGroup, member: ClassicGroupMember) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "leader": member.member_id == group.leader_id,
        "assignment": _assignment(group.protocol_type, member.assignment),
    }


def _assignment(protocol_type: str | None, data: bytes) -> dict[str, Any]:
    if protocol_type == "consumer" and data:
        try:
            decoded = ConsumerProtocolMemberAssignment_v0.decode(data)
            return {topic: sorted(partitions) for topic, partitions in decoded.assignment}
        except Exception:  # kafka-python raises assorted errors on bytes it cannot read
            pass
    return {"base64": base64.b64encode(data).decode("ascii")} if data else {}
