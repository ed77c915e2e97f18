"""Error answers in each API's own shape, and the ApiVersions answers.

Where each API carries its errors (Kafka's `*Request.getErrorResponse`):

| API             | versions | where the code goes                                         |
|-----------------|----------|-------------------------------------------------------------|
| ApiVersions     | all      | top level, always a v0 body listing only ApiVersions' range |
| FindCoordinator | 0-3      | top level, node -1                                          |
|                 | 4+       | per requested key (`coordinators`), node -1                 |
| JoinGroup       | all      | top level; generation -1, protocol_name "" (v7+: null)      |
| Heartbeat       | all      | top level                                                   |
| LeaveGroup      | 0-2      | top level                                                   |
|                 | 3+       | top level, and per requested member                         |
| SyncGroup       | all      | top level, empty assignment                                 |
| OffsetCommit    | all      | per requested partition (there is no top-level code)        |
| OffsetFetch     | 0-1      | per requested partition, offset -1, metadata ""             |
|                 | 2-7      | top level, no topics                                        |
|                 | 8+       | per requested group, no topics                              |
| DescribeGroups  | all      | per requested group, state ""                               |
| ListGroups      | all      | top level, no groups                                        |
| DeleteGroups    | all      | per requested group                                         |
| OffsetDelete    | 0        | top level, no topics                                        |
| Metadata        | 0-12     | per requested topic, no brokers                             |
| ConsumerGroupHeartbeat | all | top level, with its message; epoch -1, no assignment   |
| ConsumerGroupDescribe  | all | per requested group, with its message                  |
| TxnOffsetCommit | all      | per requested partition (there is no top-level code)        |
|                 | 13       | top level and per requested topic                           |

Without the request (a version we could not decode), an API whose codes live only in
per-item entries has nowhere to put the code: `error_response` raises ValueError and the
caller closes the connection (Kafka 4 closes it for every version it does not serve).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from protocol.api_keys import LOCAL_VERSIONS
from protocol.errors import ErrorCode
from protocol.messages import response_class

UNKNOWN_NODE_ID = -1
UNKNOWN_PORT = -1
UNKNOWN_GENERATION_ID = -1
UNKNOWN_OFFSET = -1
# kafka-python models the authorized-operations bitfield as a set of bits; None encodes
# Kafka's "omitted" value, INT32 MIN.
AUTHORIZED_OPERATIONS_OMITTED = None


def error_response(api_key: int, version: int, request: ApiMessage | None, code: int,
                   message: str | None = None) -> ApiMessage:
    """`api_key`'s response at `version` carrying `code` wherever that API puts errors."""
    build = _BUILDERS.get(api_key)
    if build is None:
        raise KeyError(f"no error response for api key {api_key}")
    cls = response_class(api_key)
    if not 0 <= version <= cls.max_version:
        raise ValueError(f"{cls.name} cannot be encoded at v{version} (codec range 0-{cls.max_version})")
    return build(cls, version, request, int(code), message)


def api_versions_error_response(code: int = ErrorCode.UNSUPPORTED_VERSION) -> ApiMessage:
    """KIP-511: the answer to an ApiVersions version above ours.

    Always a v0 body listing only ApiVersions' range, whatever version was asked: clients
    read an ApiVersions error body as v0 (kafka-python `ApiVersionsResponse.decode`,
    Kafka `ApiVersionsResponse.parse` falls back to v0), then retry at a version we list.
    Encode it at `response.version`.
    """
    low, high = LOCAL_VERSIONS[ApiKey.ApiVersions]
    return api_versions_response(0, {ApiKey.ApiVersions: (low, high)}, code)


_FEATURES_SINCE = 3     # ApiVersions v3 added the feature flags (KIP-584)


def api_versions_response(version: int, ranges: Mapping[int, tuple[int, int]],
                          code: int = ErrorCode.NONE, *, supported_features: Sequence[tuple[str, int, int]] = (),
                          finalized_features: Sequence[tuple[str, int, int]] = (),
                          features_epoch: int = -1) -> ApiMessage:
    """v3+ carries the feature flags: (name, min, max) of the supported versions and of the
    finalized levels; older versions have no place for them."""
    cls = response_class(ApiKey.ApiVersions)
    api_keys = [cls.ApiVersion(version=version, api_key=int(key), min_version=low, max_version=high)
                for key, (low, high) in sorted(ranges.items())]
    if version < _FEATURES_SINCE:
        return cls(version=version, error_code=int(code), api_keys=api_keys, throttle_time_ms=0)
    return cls(version=version, error_code=int(code), api_keys=api_keys, throttle_time_ms=0,
               supported_features=[cls.SupportedFeatureKey(version=version, name=name, min_version=low,
                                                           max_version=high)
                                   for name, low, high in supported_features],
               finalized_features_epoch=features_epoch,
               finalized_features=[cls.FinalizedFeatureKey(version=version, name=name, min_version_level=low,
                                                           max_version_level=high)
                                   for name, low, high in finalized_features])


def _requested(request: ApiMessage | None, cls: type[ApiMessage], version: int, what: str) -> ApiMessage:
    if request is None:
        raise ValueError(f"{cls.name} v{version} carries errors per {what}: the request is needed")
    return request


def _api_versions(cls, version, request, code, message):
    return api_versions_error_response(code)


def _find_coordinator(cls, version, request, code, message):
    if version < 4:
        return cls(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                   node_id=UNKNOWN_NODE_ID, host="", port=UNKNOWN_PORT)
    keys = _requested(request, cls, version, "coordinator key").coordinator_keys
    return cls(version=version, throttle_time_ms=0, coordinators=[
        cls.Coordinator(version=version, key=key, node_id=UNKNOWN_NODE_ID, host="", port=UNKNOWN_PORT,
                        error_code=code, error_message=message)
        for key in keys])


def _join_group(cls, version, request, code, message):
    # v7+: protocol_name is nullable and an error carries null; before, "" (JoinGroupRequest.java)
    return cls(version=version, throttle_time_ms=0, error_code=code, generation_id=UNKNOWN_GENERATION_ID,
               protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
               skip_assignment=False, member_id="", members=[])


def _heartbeat(cls, version, request, code, message):
    return cls(version=version, throttle_time_ms=0, error_code=code)


def _leave_group(cls, version, request, code, message):
    members = []
    if version >= 3 and request is not None:
        members = [cls.MemberResponse(version=version, member_id=member.member_id,
                                      group_instance_id=member.group_instance_id, error_code=code)
                   for member in request.members]
    return cls(version=version, throttle_time_ms=0, error_code=code, members=members)


def _sync_group(cls, version, request, code, message):
    return cls(version=version, throttle_time_ms=0, error_code=code, protocol_type=None,
               protocol_name=None, assignment=b"")


def _offset_commit(cls, version, request, code, message):
    topics = _requested(request, cls, version, "partition").topics
    return cls(version=version, throttle_time_ms=0, topics=[
        cls.OffsetCommitResponseTopic(
            version=version, name=topic.name, topic_id=topic.topic_id,
            partitions=[cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                version=version, partition_index=partition.partition_index, error_code=code)
                for partition in topic.partitions])
        for topic in topics])


def _txn_offset_commit(cls, version, request, code, message):
    topics = _requested(request, cls, version, "partition").topics
    return cls(version=version, throttle_time_ms=0, topics=[
        cls.TxnOffsetCommitResponseTopic(
            version=version, name=topic.name, topic_id=topic.topic_id,
            partitions=[cls.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                version=version, partition_index=partition.partition_index, error_code=code)
                for partition in topic.partitions])
        for topic in topics])


def _offset_fetch(cls, version, request, code, message):
    if version < 2:
        topic_cls = cls.OffsetFetchResponseTopic
        topics = [
            topic_cls(version=version, name=topic.name, partitions=[
                topic_cls.OffsetFetchResponsePartition(
                    version=version, partition_index=index, committed_offset=UNKNOWN_OFFSET,
                    metadata="", error_code=code)
                for index in topic.partition_indexes])
            for topic in _requested(request, cls, version, "partition").topics]
        return cls(version=version, topics=topics)
    if version < 8:
        return cls(version=version, throttle_time_ms=0, topics=[], error_code=code)
    groups = _requested(request, cls, version, "group").groups
    return cls(version=version, throttle_time_ms=0, groups=[
        cls.OffsetFetchResponseGroup(version=version, group_id=group.group_id, topics=[], error_code=code)
        for group in groups])


def _describe_groups(cls, version, request, code, message):
    group_ids = _requested(request, cls, version, "group").groups
    return cls(version=version, throttle_time_ms=0, groups=[
        cls.DescribedGroup(version=version, error_code=code, error_message=message, group_id=group_id,
                           group_state="", protocol_type="", protocol_data="", members=[],
                           authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for group_id in group_ids])


def _list_groups(cls, version, request, code, message):
    return cls(version=version, throttle_time_ms=0, error_code=code, groups=[])


def _delete_groups(cls, version, request, code, message):
    group_ids = _requested(request, cls, version, "group").groups_names
    return cls(version=version, throttle_time_ms=0, results=[
        cls.DeletableGroupResult(version=version, group_id=group_id, error_code=code)
        for group_id in group_ids])


def _offset_delete(cls, version, request, code, message):
    return cls(version=version, error_code=code, throttle_time_ms=0, topics=[])


def _metadata(cls, version, request, code, message):
    if version < 13:
        _requested(request, cls, version, "topic")
    requested = (request.topics or []) if request is not None else []
    topics = [cls.MetadataResponseTopic(version=version, error_code=code, name=topic.name,
                                        topic_id=topic.topic_id, is_internal=False, partitions=[],
                                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
              for topic in requested]
    return cls(version=version, throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=UNKNOWN_NODE_ID,
               topics=topics, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, error_code=code)


def _consumer_group_heartbeat(cls, version, request, code, message):
    return cls(version=version, throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
               member_epoch=-1, heartbeat_interval_ms=0, assignment=None)


def _consumer_group_describe(cls, version, request, code, message):
    group_ids = _requested(request, cls, version, "group").group_ids
    return cls(version=version, throttle_time_ms=0, groups=[
        cls.DescribedGroup(version=version, error_code=code, error_message=message, group_id=group_id,
                           group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                           authorized_operations=-2**31)
        for group_id in group_ids])


_BUILDERS = {
    ApiKey.ApiVersions: _api_versions,
    ApiKey.FindCoordinator: _find_coordinator,
    ApiKey.JoinGroup: _join_group,
    ApiKey.Heartbeat: _heartbeat,
    ApiKey.LeaveGroup: _leave_group,
    ApiKey.SyncGroup: _sync_group,
    ApiKey.OffsetCommit: _offset_commit,
    ApiKey.OffsetFetch: _offset_fetch,
    ApiKey.DescribeGroups: _describe_groups,
    ApiKey.ListGroups: _list_groups,
    ApiKey.DeleteGroups: _delete_groups,
    ApiKey.OffsetDelete: _offset_delete,
    ApiKey.Metadata: _metadata,
    ApiKey.ConsumerGroupHeartbeat: _consumer_group_heartbeat,
    ApiKey.ConsumerGroupDescribe: _consumer_group_describe,
    ApiKey.TxnOffsetCommit: _txn_offset_commit,
}
