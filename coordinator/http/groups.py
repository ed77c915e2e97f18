"""JSON views of a shard's groups for /v1/groups, read on the partition's executor, and
their lag from the log ends the app keeps (`coordinator.gateway.log_ends`).

Assignments of classic groups using the "consumer" protocol type are decoded
(ConsumerProtocolAssignment, read as v0, the prefix of every version) into
`{topic: [partitions]}`; anything else is shown as base64. KIP-848 consumer groups
(`"type": "consumer"`) show their epochs and, per member, its epoch, state, subscription,
and its assigned, revoking and target partitions by topic name (a topic id the upstream
no longer lists is shown as the id).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Mapping
from typing import Any

from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0

from coordinator import records
from coordinator.consumer_lag import LogEnd
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember
from coordinator.group.consumer.group import Assignment, ConsumerGroup, ConsumerGroupMember
from coordinator.group.topics import TopicImage
from storage.format import iter_batches

TopicPartition = tuple[str, int]
EndOf = Callable[[TopicPartition], LogEnd]


def summary(group: ClassicGroup, partition: int) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "partition": partition,
        "type": "classic",
        "state": group.state.value,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "generation": group.generation,
        "leader": group.leader_id,
        "members": len(group.members),
        "state_since_ms": group.current_state_timestamp_ms,
    }


def consumer_summary(group: ConsumerGroup, partition: int) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "partition": partition,
        "type": "consumer",
        "state": group.state,
        "protocol_type": "consumer",
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": len(group.members),
    }


def summaries(shard: Any) -> list[dict[str, Any]]:
    return ([summary(g, shard.partition) for g in shard.groups.values()]
            + [consumer_summary(g, shard.partition) for g in shard.consumer_groups.values()])


def detail(shard: Any, group_id: str) -> dict[str, Any] | None:
    consumer_group = shard.consumer_groups.get(group_id)
    if consumer_group is not None:
        view = consumer_summary(consumer_group, shard.partition)
        image = shard.consumer.topics()
        view["members"] = [_consumer_member(consumer_group, m, image) for m in consumer_group.members.values()]
    else:
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


async def add_offset_origins(view: dict[str, Any], store: Any, partition: int, chunk_bytes: int = 1 << 20) -> None:
    """Each committed offset's origin (`records.origin_view`) from the audit headers of its
    latest record: the group's partition is read as the durable batches it stores, a chunk
    at a time with the event loop free in between, so it holds across restarts and
    compaction (the loader keeps no headers)."""
    group_id = view["group_id"]
    needle = group_id.encode("utf-8")
    adopted: dict[tuple[str, int], tuple[str, int] | None] = {}
    offset = 0
    while True:
        chunk = store.read_durable(partition, offset, chunk_bytes)
        for _, batch in iter_batches(chunk.data):
            offset = batch.last_offset + 1
            if batch.is_control:
                continue
            for record in batch.records:
                if record.key is None or needle not in record.key:
                    continue
                key = records.deserialize_key(record.key)
                if isinstance(key, records.OffsetCommitKey) and key.group == group_id:
                    adopted[(key.topic, key.partition)] = records.adoption_of(record.headers)
        if not chunk.data or offset >= chunk.durable_end_offset:
            break
        await asyncio.sleep(0)
    for topic, by_partition in view["offsets"].items():
        for partition_index, entry in by_partition.items():
            entry["origin"] = records.origin_view(adopted.get((topic, int(partition_index))))


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


def _consumer_member(group: ConsumerGroup, member: ConsumerGroupMember, image: TopicImage) -> dict[str, Any]:
    def named(assignment: Assignment) -> dict[str, list[int]]:
        return {(image.by_id[t].name if t in image.by_id else str(t)): sorted(ps) for t, ps in assignment.items()}

    return {
        "member_id": member.member_id,
        "instance_id": member.instance_id,
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "protocol": "classic" if member.uses_classic_protocol else "consumer",
        "session_timeout_ms": member.classic.session_timeout_ms if member.classic is not None else None,
        "member_epoch": member.member_epoch,
        "state": member.state.name,
        "subscribed_topic_names": list(member.subscribed_topic_names),
        "subscribed_topic_regex": member.subscribed_topic_regex,
        "server_assignor": member.server_assignor,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "assignment": named(member.assigned),
        "revoking": named(member.pending_revocation),
        "target": named(group.target.get(member.member_id, {})),
    }


def _assignment(protocol_type: str | None, data: bytes) -> dict[str, Any]:
    if protocol_type == "consumer" and data:
        try:
            decoded = ConsumerProtocolMemberAssignment_v0.decode(data)
            return {topic: sorted(partitions) for topic, partitions in decoded.assignment}
        except Exception:  # kafka-python raises assorted errors on bytes it cannot read
            pass
    return {"base64": base64.b64encode(data).decode("ascii")} if data else {}


def committed_offsets(shard: Any) -> dict[str, dict[TopicPartition, int]]:
    """Every group's committed offset per (topic, partition)."""
    return {group_id: {(topic, partition): v.offset for topic, by_partition in topics.items()
                       for partition, v in by_partition.items()}
            for group_id, topics in shard.offsets.committed.items()}


def lag_summary(committed: Mapping[TopicPartition, int], end_of: EndOf) -> dict[str, Any]:
    """A group's lag, in total and per topic: the sum over its partitions, or None when any
    partition's lag is unknown (a sum of the others would read as the lag), with how many
    are unknown and why the first is (never a negative lag: `coordinator.consumer_lag`),
    and `as_of_ms`, the time of the oldest log end a known lag was computed from (a sum is
    as stale as its stalest part)."""
    topics: dict[str, dict[str, Any]] = {}
    for (topic, partition), offset in sorted(committed.items()):
        end = end_of((topic, partition))
        lag = end.lag(offset)
        entry = topics.setdefault(topic, {"lag": 0, "unknown_partitions": 0, "unknown_reason": None,
                                          "as_of_ms": None})
        if lag.value is None:
            entry["unknown_partitions"] += 1
            entry["unknown_reason"] = entry["unknown_reason"] or f"{topic}-{partition}: {lag.reason}"
            entry["lag"] = None
        else:
            entry["as_of_ms"] = _oldest(entry["as_of_ms"], end.as_of_ms)
            if entry["lag"] is not None:
                entry["lag"] += lag.value
    unknown = [t for t in topics.values() if t["lag"] is None]
    as_of = None
    for entry in topics.values():
        as_of = _oldest(as_of, entry["as_of_ms"])
    return {"total": None if unknown else sum(t["lag"] for t in topics.values()),
            "unknown_partitions": sum(t["unknown_partitions"] for t in unknown),
            "unknown_reason": unknown[0]["unknown_reason"] if unknown else None, "as_of_ms": as_of,
            "topics": topics}


def _oldest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def add_partition_lag(view: dict[str, Any], end_of: EndOf) -> None:
    """Each committed offset of a `detail` view gains its log end, when the upstream gave
    it, and its lag (or why unknown)."""
    committed = {}
    for topic, by_partition in view["offsets"].items():
        for partition, entry in by_partition.items():
            end = end_of((topic, int(partition)))
            lag = end.lag(entry["offset"])
            entry.update(log_end_offset=end.offset, log_end_as_of_ms=end.as_of_ms, lag=lag.value,
                         lag_unknown_reason=lag.reason)
            committed[(topic, int(partition))] = entry["offset"]
    view["lag"] = lag_summary(committed, end_of)
