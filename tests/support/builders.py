"""Request builders with defaults, sent through the wire codec at the version under test.

Encoding and decoding each request at its version drops the fields that version does
not carry (e.g. GroupInstanceId before JoinGroup v5), exactly as a real client's bytes
would reach the coordinator.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from kafka.protocol.admin.groups import DeleteGroupsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest

SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 5_000


def _wire(request, version: int):
    return type(request).decode(request.encode(), version=version)


def subscription(*topics: str, version: int = 0) -> bytes:
    """ConsumerProtocolSubscription bytes: int16 version, topics, null user data."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


def subscription_v1(topics, owned: Mapping[str, list[int]]) -> bytes:
    """ConsumerProtocolSubscription v1: topics and the partitions the member owns (a
    cooperative member's rejoin)."""
    tp = ConsumerProtocolSubscription.TopicPartition
    return ConsumerProtocolSubscription(
        version=1, topics=list(topics), user_data=None,
        owned_partitions=[tp(topic=t, partitions=list(ps)) for t, ps in owned.items()]).encode(version=1)


def join_request(version: int, group_id: str = "g", member_id: str = "", *,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS, rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
                 protocol_type: str = "consumer", protocols=(("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"),),
                 group_instance_id: str | None = None, reason: str | None = None) -> JoinGroupRequest:
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    return _wire(JoinGroupRequest(
        version=version, group_id=group_id, session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id, group_instance_id=group_instance_id,
        protocol_type=protocol_type, protocols=[proto(name=n, metadata=m) for n, m in protocols],
        reason=reason), version)


def sync_request(version: int, group_id: str = "g", member_id: str = "", generation_id: int = 1, *,
                 group_instance_id: str | None = None, protocol_type: str | None = "consumer",
                 protocol_name: str | None = "range", assignments=()) -> SyncGroupRequest:
    a = SyncGroupRequest.SyncGroupRequestAssignment
    return _wire(SyncGroupRequest(
        version=version, group_id=group_id, generation_id=generation_id, member_id=member_id,
        group_instance_id=group_instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[a(member_id=m, assignment=b) for m, b in assignments]), version)


def heartbeat_request(version: int, group_id: str = "g", member_id: str = "", generation_id: int = 1, *,
                      group_instance_id: str | None = None) -> HeartbeatRequest:
    return _wire(HeartbeatRequest(version=version, group_id=group_id, generation_id=generation_id,
                                  member_id=member_id, group_instance_id=group_instance_id), version)


def leave_request(version: int, group_id: str = "g", members=()) -> LeaveGroupRequest:
    """`members`: (member_id, group_instance_id) pairs; v0-2 send only the first member id."""
    if version <= 2:
        return _wire(LeaveGroupRequest(version=version, group_id=group_id, member_id=members[0][0]), version)
    ident = LeaveGroupRequest.MemberIdentity
    return _wire(LeaveGroupRequest(version=version, group_id=group_id, members=[
        ident(member_id=m, group_instance_id=i) for m, i in members]), version)


def commit_request(version: int, group_id: str = "g", offsets=(("t", 0, 10, None),), *, member_id: str = "",
                   generation_id: int = -1, group_instance_id: str | None = None,
                   retention_time_ms: int = -1, leader_epoch: int = -1,
                   commit_timestamps: Mapping[tuple[str, int], int] | None = None) -> OffsetCommitRequest:
    """`offsets`: (topic, partition, offset, metadata) tuples; `commit_timestamps` (v1) by
    (topic, partition), -1 for the others."""
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for topic, partition, offset, metadata in offsets:
        by_topic.setdefault(topic, []).append(part_cls(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=leader_epoch,
            commit_timestamp=(commit_timestamps or {}).get((topic, partition), -1), committed_metadata=metadata))
    return _wire(OffsetCommitRequest(
        version=version, group_id=group_id, generation_id_or_member_epoch=generation_id, member_id=member_id,
        group_instance_id=group_instance_id, retention_time_ms=retention_time_ms,
        topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()]), version)


def offset_delete_request(group_id: str = "g", topics=(("t", (0,)),)) -> OffsetDeleteRequest:
    topic_cls = OffsetDeleteRequest.OffsetDeleteRequestTopic
    part_cls = topic_cls.OffsetDeleteRequestPartition
    return _wire(OffsetDeleteRequest(version=0, group_id=group_id, topics=[
        topic_cls(name=t, partitions=[part_cls(partition_index=p) for p in ps]) for t, ps in topics]), 0)


def delete_groups_request(version: int, *group_ids: str) -> DeleteGroupsRequest:
    return _wire(DeleteGroupsRequest(version=version, groups_names=list(group_ids)), version)


def topic_id(name: str) -> uuid.UUID:
    """A stable id per topic name, as a cluster would hand out."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kgc-test-topic/{name}")


_UNSET = object()


def consumer_heartbeat_request(version: int, topics, group_id: str = "g", member_id: str = "m1",
                               member_epoch: int = 0, *, instance_id: str | None = None, rack_id: str | None = None,
                               rebalance_timeout_ms: int | None = None, subscribe=_UNSET, regex: str | None = None,
                               assignor: str | None = None, owned=_UNSET) -> ConsumerGroupHeartbeatRequest:
    """A ConsumerGroupHeartbeat as a client sends it: a join (epoch 0) carries the whole
    subscription and an empty TopicPartitions unless told otherwise; later heartbeats
    carry only what is given. `owned` is {topic name: partitions} (or None)."""
    joining = member_epoch == 0
    if subscribe is _UNSET:
        subscribe = ["t"] if joining and regex is None else None
    if owned is _UNSET:
        owned = {} if joining else None
    if rebalance_timeout_ms is None:
        rebalance_timeout_ms = 30_000 if joining else -1
    cls = ConsumerGroupHeartbeatRequest
    partitions = None if owned is None else [
        cls.TopicPartitions(version=version, topic_id=topics.by_name[name].topic_id, partitions=sorted(ps))
        for name, ps in owned.items()]
    return cls(version=version, group_id=group_id, member_id=member_id, member_epoch=member_epoch,
               instance_id=instance_id, rack_id=rack_id, rebalance_timeout_ms=rebalance_timeout_ms,
               subscribed_topic_names=subscribe, subscribed_topic_regex=regex, server_assignor=assignor,
               topic_partitions=partitions)
