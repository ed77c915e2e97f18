"""Schema-valid but hostile requests, as the fuzz test and the fuzz RSS benchmark send them: a
hypothesis strategy over every group API kgc serves (any version, ids past what the record
format holds, repeated protocol names, extreme timeouts and offsets, thousands of groups,
keys or filter entries), each request's frame, and one frame sent on its own connection."""

from __future__ import annotations

import socket

from hypothesis import strategies as st
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

HEALTHY_GROUP = "g-healthy"

# Ids and names as an attacker picks them: short, odd, or past the int16 records hold.
hostile_text = st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "\x00", "ü" * 20]),
                         st.integers(32_000, 40_000).map(lambda n: "x" * n))
group_ids = hostile_text.filter(lambda g: g != HEALTHY_GROUP)
int32s = st.integers(-2**31, 2**31 - 1)
int64s = st.integers(-2**63, 2**63 - 1)
many = st.integers(0, 3_000)
short_text = st.text(max_size=12)     # for lists of thousands: frames stay under the limit


def join(version, group, member, instance, protocol_type, names, session_ms, rebalance_ms):
    proto = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(version=version, group_id=group, session_timeout_ms=session_ms,
                            rebalance_timeout_ms=rebalance_ms, member_id=member, group_instance_id=instance,
                            protocol_type=protocol_type, protocols=[proto(name=n, metadata=b"\x00") for n in names],
                            reason=None)


def commit(version, group, member, generation, topics, partitions, offset, metadata):
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        version=version, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        group_instance_id=None, retention_time_ms=-1,
        topics=[topic_cls(name=t, partitions=[part_cls(partition_index=p, committed_offset=offset,
                                                       committed_leader_epoch=-1, committed_metadata=metadata)
                                              for p in range(partitions)]) for t in topics])


def fetch(version, group, topics):
    if version >= 8:
        g = OffsetFetchRequest.OffsetFetchRequestGroup
        t = g.OffsetFetchRequestTopics
        return OffsetFetchRequest(version=version, require_stable=False, groups=[
            g(group_id=group, topics=[t(name=n, partition_indexes=[0]) for n in topics])])
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(version=version, group_id=group, require_stable=False,
                              topics=[t(name=n, partition_indexes=[0]) for n in topics])


hostile_requests = st.one_of(
    st.builds(join, st.integers(0, 9), group_ids, hostile_text, st.none() | hostile_text, hostile_text,
              st.lists(hostile_text, max_size=4) | st.just(["range", "range"]), int32s, int32s),
    st.builds(lambda v, g, m, gen, inst: SyncGroupRequest(version=v, group_id=g, generation_id=gen, member_id=m,
                                                          group_instance_id=inst, protocol_type="consumer",
                                                          protocol_name="range", assignments=[]),
              st.integers(0, 5), group_ids, hostile_text, int32s, st.none() | hostile_text),
    st.builds(lambda v, g, m, gen: HeartbeatRequest(version=v, group_id=g, generation_id=gen, member_id=m,
                                                    group_instance_id=None),
              st.integers(0, 4), group_ids, hostile_text, int32s),
    st.builds(lambda v, g, m: LeaveGroupRequest(version=v, group_id=g, member_id=m, members=[
                  LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=None)]),
              st.integers(0, 5), group_ids, hostile_text),
    st.builds(commit, st.integers(2, 9), group_ids, hostile_text, int32s, st.lists(hostile_text, max_size=3),
              st.integers(0, 200), int64s, st.none() | hostile_text),
    st.builds(fetch, st.integers(1, 9), group_ids, st.lists(hostile_text, max_size=3)),
    st.builds(lambda v, n, g: DescribeGroupsRequest(version=v, groups=[f"{g}-{i}" for i in range(n)],
                                                    include_authorized_operations=True),
              st.integers(0, 5), many, short_text),
    st.builds(lambda v, n, s: ListGroupsRequest(version=v, states_filter=[s] * n, types_filter=[s]),
              st.integers(4, 5), many, short_text),
    st.builds(lambda v, g: DeleteGroupsRequest(version=v, groups_names=g),
              st.integers(0, 2), st.lists(group_ids, max_size=5)),
    st.builds(lambda n, g: FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=[g] * n),
              many, short_text),
)


def encoded(request) -> bytes | None:
    """The request's frame; None when its version cannot carry a value (a string past an
    int16 length in a non-flexible version): a client could not send it either."""
    request.with_header(correlation_id=7, client_id="fuzz")
    try:
        return bytes(request.encode(header=True, framed=True))
    except Exception:
        return None


def send_and_drain(port: int, data: bytes, park_s: float = 5.0) -> None:
    """Send, then read until kgc closes; after `park_s` without a byte the request is
    parked (a JoinGroup waiting for its rebalance) and the connection is dropped, as a
    client that gives up would."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(park_s)
        try:
            while s.recv(65536):
                pass
        except TimeoutError:
            if park_s >= 5.0:
                raise
