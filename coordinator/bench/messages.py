"""The requests the load generator sends, at one fixed version per API.

The versions are the ones librdkafka sends for the classic group protocol (FindCoordinator
≤2, JoinGroup ≤5, SyncGroup ≤3, Heartbeat ≤3, LeaveGroup ≤1) and the last non-flexible
OffsetCommit (7) and OffsetFetch (5), so the same bytes go to every target and every
response has header v0. A target that does not advertise one of them cannot run the
workloads that need it (`missing_versions`).

Cold requests (join, sync, leave, fetch set-up) go through kafka-python's codecs. The two
hot ones are cheaper: a Heartbeat is a `Template` re-sent with a new correlation id, and
OffsetCommit v7 is packed here by hand (kafka-python spends ~200 µs on a 50-partition
commit, which would make the generator, not the target, the bottleneck); the tests check
those bytes against kafka-python's.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.bench.wire import Template

CLIENT_ID = "kgc-bench"
PROTOCOL_TYPE = "consumer"
ASSIGNOR = "range"

VERSIONS: dict[ApiKey, int] = {
    ApiKey.FindCoordinator: 2,
    ApiKey.JoinGroup: 5,
    ApiKey.SyncGroup: 3,
    ApiKey.Heartbeat: 3,
    ApiKey.LeaveGroup: 1,
    ApiKey.OffsetCommit: 7,
    ApiKey.OffsetFetch: 5,
}
CREATE_TOPICS_VERSION = 5
METADATA_VERSION = 4

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_STRING_LEN = _INT16
_COMMIT_HEADER = struct.Struct(">ihhi")       # size, api_key, api_version, correlation_id
_COMMIT_PARTITION_TAIL = struct.Struct(">qih")  # committed_offset, leader_epoch -1, metadata ""


def missing_versions(advertised: Mapping[int, tuple[int, int]], keys: Sequence[ApiKey]) -> list[str]:
    """The fixed versions among `keys` that the target does not serve, as 'Api vN'."""
    missing = []
    for key in keys:
        low, high = advertised.get(key, (0, -1))
        if not low <= VERSIONS[key] <= high:
            missing.append(f"{key.name} v{VERSIONS[key]}")
    return missing


def encode(request, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(request.encode(header=True, framed=True))


def decode(response_class, version: int, payload: bytes):
    return response_class.decode(payload, version=version, header=True)


# ---------------------------------------------------------------- discovery and set-up


def api_versions_request():
    return ApiVersionsRequest[0]()


def decode_api_versions(payload: bytes) -> dict[int, tuple[int, int]]:
    response = decode(ApiVersionsResponse, 0, payload)
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def create_topic_request(name: str, partitions: int):
    cls = CreateTopicsRequest[CREATE_TOPICS_VERSION]
    topic = cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                               assignments=[], configs=[])
    return cls(topics=[topic], timeout_ms=10_000, validate_only=False)


def create_topic_errors(payload: bytes) -> dict[str, int]:
    response = decode(CreateTopicsResponse, CREATE_TOPICS_VERSION, payload)
    return {t.name: t.error_code for t in response.topics}


def metadata_request(topic: str):
    cls = MetadataRequest[METADATA_VERSION]
    return cls(topics=[cls.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)


def topic_partitions(payload: bytes, topic: str) -> int:
    """How many partitions the Metadata answer gives `topic` (0: none, or an error)."""
    response = decode(MetadataResponse, METADATA_VERSION, payload)
    return next((len(t.partitions) for t in response.topics if t.name == topic and t.error_code == 0), 0)


# ---------------------------------------------------------------- membership


def find_coordinator_request(group: str):
    return FindCoordinatorRequest[VERSIONS[ApiKey.FindCoordinator]](key=group, key_type=0)


def decode_find_coordinator(payload: bytes):
    return decode(FindCoordinatorResponse, VERSIONS[ApiKey.FindCoordinator], payload)


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: opaque to a coordinator, but what a consumer sends."""
    name = topic.encode()
    return _INT16.pack(0) + _INT32.pack(1) + _STRING_LEN.pack(len(name)) + name + _INT32.pack(-1)


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    name = topic.encode()
    return b"".join((_INT16.pack(0), _INT32.pack(1), _STRING_LEN.pack(len(name)), name,
                     _INT32.pack(len(partitions)), *(_INT32.pack(p) for p in partitions), _INT32.pack(-1)))


def join_request(group: str, member_id: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                 metadata: bytes, assignor: str = ASSIGNOR):
    cls = JoinGroupRequest[VERSIONS[ApiKey.JoinGroup]]
    return cls(group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
               member_id=member_id, group_instance_id=None, protocol_type=PROTOCOL_TYPE,
               protocols=[cls.JoinGroupRequestProtocol(name=assignor, metadata=metadata)])


def decode_join(payload: bytes):
    return decode(JoinGroupResponse, VERSIONS[ApiKey.JoinGroup], payload)


def sync_request(group: str, generation: int, member_id: str, assignments: Mapping[str, bytes]):
    cls = SyncGroupRequest[VERSIONS[ApiKey.SyncGroup]]
    return cls(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
               assignments=[cls.SyncGroupRequestAssignment(member_id=m, assignment=a)
                            for m, a in assignments.items()])


def decode_sync(payload: bytes):
    return decode(SyncGroupResponse, VERSIONS[ApiKey.SyncGroup], payload)


def leave_request(group: str, member_id: str):
    return LeaveGroupRequest[VERSIONS[ApiKey.LeaveGroup]](group_id=group, member_id=member_id)


def decode_leave(payload: bytes):
    return decode(LeaveGroupResponse, VERSIONS[ApiKey.LeaveGroup], payload)


def heartbeat_template(group: str, generation: int, member_id: str) -> Template:
    request = HeartbeatRequest[VERSIONS[ApiKey.Heartbeat]](
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None)
    return Template(encode(request, 0))


def heartbeat_error(payload: bytes) -> int:
    # v3 response: header v0 (correlation_id), throttle_time_ms int32, error_code int16
    return _INT16.unpack_from(payload, 8)[0]


# ---------------------------------------------------------------- offsets


class OffsetCommitEncoder:
    """OffsetCommit v7 for one group committing one offset to partitions first..first+n-1
    of a topic, as a simple consumer (generation -1, no member id), packed without
    kafka-python."""

    def __init__(self, group: str, topic: str, partitions: int, first: int = 0):
        def string(s: str) -> bytes:
            b = s.encode()
            return _STRING_LEN.pack(len(b)) + b

        self._after_header = b"".join((
            string(CLIENT_ID), string(group), _INT32.pack(-1), string(""), _INT16.pack(-1),
            _INT32.pack(1), string(topic), _INT32.pack(partitions)))
        self._indexes = [_INT32.pack(p) for p in range(first, first + partitions)]
        self._size = 8 + len(self._after_header) + partitions * (4 + _COMMIT_PARTITION_TAIL.size)
        self.partitions = partitions

    def frame(self, correlation_id: int, offset: int) -> bytes:
        tail = _COMMIT_PARTITION_TAIL.pack(offset, -1, 0)
        head = _COMMIT_HEADER.pack(self._size, ApiKey.OffsetCommit, VERSIONS[ApiKey.OffsetCommit], correlation_id)
        return b"".join((head, self._after_header, tail.join(self._indexes), tail))


def offset_commit_request(group: str, topic: str, partitions: int, offset: int, first: int = 0):
    """The kafka-python twin of `OffsetCommitEncoder`, for set-up and for its tests."""
    cls = OffsetCommitRequest[VERSIONS[ApiKey.OffsetCommit]]
    topic_cls = cls.OffsetCommitRequestTopic
    partition_cls = topic_cls.OffsetCommitRequestPartition
    return cls(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
               topics=[topic_cls(name=topic, partitions=[
                   partition_cls(partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                                 committed_metadata="") for p in range(first, first + partitions)])])


@functools.cache
def _partition_results(count: int) -> struct.Struct:
    return struct.Struct(">" + "ih" * count)


def offset_commit_errors(payload: bytes) -> tuple[int, int]:
    """(partitions answered, partitions with an error) of an OffsetCommit v7 response."""
    # header v0 (4), throttle_time_ms (4), topics count (4); per topic: name, partitions
    topics = _INT32.unpack_from(payload, 8)[0]
    pos = 12
    answered = failed = 0
    for _ in range(topics):
        pos += 2 + _STRING_LEN.unpack_from(payload, pos)[0]
        count = _INT32.unpack_from(payload, pos)[0]
        pos += 4
        results = _partition_results(count)
        values = results.unpack_from(payload, pos)
        pos += results.size
        answered += count
        failed += count - values[1::2].count(0)
    return answered, failed


def offset_commit_error(payload: bytes) -> int:
    """The first partition error of an OffsetCommit v7 response, NONE (0) when there is none
    (decoded whole: for set-up, not the measured loops)."""
    response = decode(OffsetCommitResponse, VERSIONS[ApiKey.OffsetCommit], payload)
    return next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)


# OffsetFetch v8+ (KIP-709, one group here): what the Java client and librdkafka send,
# v9 for a classic group. VERSIONS' v5 is what kafka-python and aiokafka send.
OFFSET_FETCH_GROUPS_VERSION = 9


def offset_fetch_request(group: str, topic: str, partitions: int, first: int = 0, version: int | None = None):
    version = VERSIONS[ApiKey.OffsetFetch] if version is None else version
    cls = OffsetFetchRequest[version]
    indexes = list(range(first, first + partitions))
    if version < 8:
        return cls(group_id=group, topics=[cls.OffsetFetchRequestTopic(name=topic, partition_indexes=indexes)])
    group_cls = cls.OffsetFetchRequestGroup
    return cls(groups=[group_cls(group_id=group, member_id=None, member_epoch=-1, topics=[
        group_cls.OffsetFetchRequestTopics(name=topic, partition_indexes=indexes)])], require_stable=False)


def decode_offset_fetch(payload: bytes, version: int | None = None):
    """(error code, topics) of the answer's one group."""
    version = VERSIONS[ApiKey.OffsetFetch] if version is None else version
    response = decode(OffsetFetchResponse, version, payload)
    if version < 8:
        return response.error_code, response.topics
    (group,) = response.groups
    return group.error_code, group.topics


def offset_fetch_error(payload: bytes, version: int | None = None) -> int:
    # v2-5 put the group-level error_code last in the body; v8+ (one group) end with its
    # error_code, the group's empty tagged fields and the response's.
    version = VERSIONS[ApiKey.OffsetFetch] if version is None else version
    return _INT16.unpack_from(payload, len(payload) - (4 if version >= 8 else 2))[0]
