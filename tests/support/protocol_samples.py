"""Representative requests and responses for every API kgc serves, at any version.

Every field carries a non-default value, so a codec that drops or swaps a field shows in
a round trip. Fields outside the requested version are given too: kafka-python ignores
them when encoding, which keeps one builder per message instead of one per version.
"""

from __future__ import annotations

import uuid

from kafka.protocol.api_key import ApiKey

from protocol.api_keys import LOCAL_VERSIONS
from protocol.messages import request_class, response_class

TOPIC_ID = uuid.UUID("6f1c1a5e-8a3b-4c2d-9e0f-112233445566")


def served_versions() -> list[tuple[ApiKey, int]]:
    return [(api_key, version)
            for api_key, (low, high) in LOCAL_VERSIONS.items()
            for version in range(low, high + 1)]


def _at(struct_cls, version: int, **fields):
    """A nested struct at `version`, or unversioned when the struct does not exist there."""
    try:
        return struct_cls(version=version, **fields)
    except ValueError:
        return struct_cls(**fields)


def sample_request(api_key: int, version: int):
    return _REQUESTS[api_key](request_class(api_key), version)


def sample_response(api_key: int, version: int):
    return _RESPONSES[api_key](response_class(api_key), version)


def _api_versions_request(cls, v):
    return cls(version=v, client_software_name="kgc-tests", client_software_version="1.2.3")


def _api_versions_response(cls, v):
    return cls(version=v, error_code=0, throttle_time_ms=12, api_keys=[
        _at(cls.ApiVersion, v, api_key=11, min_version=0, max_version=9),
        _at(cls.ApiVersion, v, api_key=18, min_version=0, max_version=4)],
        supported_features=[_at(cls.SupportedFeatureKey, v, name="group.version", min_version=0,
                                                    max_version=1)],
        finalized_features_epoch=7,
        finalized_features=[_at(cls.FinalizedFeatureKey, v, name="group.version", max_version_level=1,
                                                    min_version_level=1)])


def _find_coordinator_request(cls, v):
    return cls(version=v, key="orders", key_type=0, coordinator_keys=["orders", "payments"])


def _find_coordinator_response(cls, v):
    return cls(version=v, throttle_time_ms=5, error_code=15, error_message="not yet", node_id=4242,
               host="kgc.example", port=9092, coordinators=[
                   _at(cls.Coordinator, v, key="orders", node_id=4242, host="kgc.example", port=9092,
                                   error_code=0, error_message=None),
                   _at(cls.Coordinator, v, key="payments", node_id=-1, host="", port=-1,
                                   error_code=15, error_message="loading")])


def _join_group_request(cls, v):
    return cls(version=v, group_id="orders", session_timeout_ms=45_000, rebalance_timeout_ms=300_000,
               member_id="consumer-1-5b1e", group_instance_id="instance-a", protocol_type="consumer",
               protocols=[_at(cls.JoinGroupRequestProtocol, v, name="range", metadata=b"\x00\x01range"),
                          _at(cls.JoinGroupRequestProtocol, v, name="roundrobin", metadata=b"\x00\x02rr")],
               reason="rejoining after poll timeout")


def _join_group_response(cls, v):
    return cls(version=v, throttle_time_ms=3, error_code=0, generation_id=17, protocol_type="consumer",
               protocol_name="range", leader="consumer-1-5b1e", skip_assignment=v >= 9,
               member_id="consumer-1-5b1e", members=[
                   _at(cls.JoinGroupResponseMember, v, member_id="consumer-1-5b1e",
                                               group_instance_id="instance-a", metadata=b"\x00\x01a"),
                   _at(cls.JoinGroupResponseMember, v, member_id="consumer-2-77aa",
                                               group_instance_id=None, metadata=b"\x00\x01b")])


def _heartbeat_request(cls, v):
    return cls(version=v, group_id="orders", generation_id=17, member_id="consumer-1-5b1e",
               group_instance_id="instance-a")


def _heartbeat_response(cls, v):
    return cls(version=v, throttle_time_ms=9, error_code=27)


def _leave_group_request(cls, v):
    return cls(version=v, group_id="orders", member_id="consumer-1-5b1e", members=[
        _at(cls.MemberIdentity, v, member_id="consumer-1-5b1e", group_instance_id="instance-a",
                           reason="shutting down"),
        _at(cls.MemberIdentity, v, member_id="", group_instance_id="instance-b", reason=None)])


def _leave_group_response(cls, v):
    return cls(version=v, throttle_time_ms=2, error_code=0, members=[
        _at(cls.MemberResponse, v, member_id="consumer-1-5b1e", group_instance_id="instance-a",
                           error_code=0),
        _at(cls.MemberResponse, v, member_id="", group_instance_id="instance-b", error_code=25)])


def _sync_group_request(cls, v):
    return cls(version=v, group_id="orders", generation_id=17, member_id="consumer-1-5b1e",
               group_instance_id="instance-a", protocol_type="consumer", protocol_name="range",
               assignments=[_at(cls.SyncGroupRequestAssignment, v, member_id="consumer-1-5b1e",
                                                           assignment=b"\x00\x01assigned")])


def _sync_group_response(cls, v):
    return cls(version=v, throttle_time_ms=1, error_code=0, protocol_type="consumer",
               protocol_name="range", assignment=b"\x00\x01assigned")


def _offset_commit_request(cls, v):
    topic_cls = cls.OffsetCommitRequestTopic
    partition_cls = topic_cls.OffsetCommitRequestPartition
    return cls(version=v, group_id="orders", generation_id_or_member_epoch=17, member_id="consumer-1-5b1e",
               group_instance_id="instance-a", retention_time_ms=86_400_000, topics=[
                   _at(topic_cls, v, name="events", topic_id=TOPIC_ID, partitions=[
                       _at(partition_cls, v, partition_index=0, committed_offset=1234,
                                     committed_leader_epoch=5, committed_metadata="batch-9"),
                       _at(partition_cls, v, partition_index=3, committed_offset=99,
                                     committed_leader_epoch=5, committed_metadata=None)]),
                   _at(topic_cls, v, name="audit", topic_id=TOPIC_ID, partitions=[
                       _at(partition_cls, v, partition_index=1, committed_offset=7,
                                     committed_leader_epoch=-1, committed_metadata="")])])


def _offset_commit_response(cls, v):
    topic_cls = cls.OffsetCommitResponseTopic
    partition_cls = topic_cls.OffsetCommitResponsePartition
    return cls(version=v, throttle_time_ms=4, topics=[
        _at(topic_cls, v, name="events", topic_id=TOPIC_ID, partitions=[
            _at(partition_cls, v, partition_index=0, error_code=0),
            _at(partition_cls, v, partition_index=3, error_code=12)])])


def _offset_fetch_request(cls, v):
    group_cls = cls.OffsetFetchRequestGroup
    return cls(version=v, group_id="orders", require_stable=True, topics=[
        _at(cls.OffsetFetchRequestTopic, v, name="events", partition_indexes=[0, 3]),
        _at(cls.OffsetFetchRequestTopic, v, name="audit", partition_indexes=[1])],
        groups=[
            _at(group_cls, v, group_id="orders", member_id="consumer-1-5b1e", member_epoch=17, topics=[
                _at(group_cls.OffsetFetchRequestTopics, v, name="events", topic_id=TOPIC_ID,
                                                   partition_indexes=[0, 3])]),
            _at(group_cls, v, group_id="payments", member_id=None, member_epoch=-1, topics=None)])


def _offset_fetch_response(cls, v):
    topic_cls = cls.OffsetFetchResponseTopic
    group_cls = cls.OffsetFetchResponseGroup
    group_topic_cls = group_cls.OffsetFetchResponseTopics
    return cls(version=v, throttle_time_ms=6, error_code=0, topics=[
        _at(topic_cls, v, name="events", partitions=[
            _at(topic_cls.OffsetFetchResponsePartition, v, partition_index=0, committed_offset=1234,
                                                   committed_leader_epoch=5, metadata="batch-9",
                                                   error_code=0),
            _at(topic_cls.OffsetFetchResponsePartition, v, partition_index=3, committed_offset=-1,
                                                   committed_leader_epoch=-1, metadata=None,
                                                   error_code=0)])],
        groups=[_at(group_cls, v, group_id="orders", error_code=0, topics=[
            _at(group_topic_cls, v, name="events", topic_id=TOPIC_ID, partitions=[
                _at(group_topic_cls.OffsetFetchResponsePartitions, v, partition_index=0, committed_offset=1234, committed_leader_epoch=5,
                    metadata="batch-9", error_code=0)])]),
            _at(group_cls, v, group_id="payments", error_code=69, topics=[])])


def _describe_groups_request(cls, v):
    return cls(version=v, groups=["orders", "payments"], include_authorized_operations=True)


def _describe_groups_response(cls, v):
    group_cls = cls.DescribedGroup
    return cls(version=v, throttle_time_ms=8, groups=[
        _at(group_cls, v, error_code=0, error_message=None, group_id="orders", group_state="Stable",
                  protocol_type="consumer", protocol_data="range", authorized_operations={1, 3}, members=[
                      _at(group_cls.DescribedGroupMember, v, member_id="consumer-1-5b1e", group_instance_id="instance-a",
                          client_id="rdkafka", client_host="/10.0.0.7", member_metadata=b"\x00\x01m",
                          member_assignment=b"\x00\x01a")]),
        _at(group_cls, v, error_code=69, error_message="group payments not found", group_id="payments",
                  group_state="Dead", protocol_type="", protocol_data="", members=[],
                  authorized_operations=None)])


def _list_groups_request(cls, v):
    return cls(version=v, states_filter=["Stable", "Empty"], types_filter=["classic"])


def _list_groups_response(cls, v):
    return cls(version=v, throttle_time_ms=1, error_code=0, groups=[
        _at(cls.ListedGroup, v, group_id="orders", protocol_type="consumer", group_state="Stable",
                        group_type="classic"),
        _at(cls.ListedGroup, v, group_id="connect-sink", protocol_type="connect", group_state="Empty",
                        group_type="classic")])


def _delete_groups_request(cls, v):
    return cls(version=v, groups_names=["orders", "payments"])


def _delete_groups_response(cls, v):
    return cls(version=v, throttle_time_ms=0, results=[
        _at(cls.DeletableGroupResult, v, group_id="orders", error_code=0),
        _at(cls.DeletableGroupResult, v, group_id="payments", error_code=68)])


def _offset_delete_request(cls, v):
    topic_cls = cls.OffsetDeleteRequestTopic
    return cls(version=v, group_id="orders", topics=[
        _at(topic_cls, v, name="events", partitions=[
            _at(topic_cls.OffsetDeleteRequestPartition, v, partition_index=0),
            _at(topic_cls.OffsetDeleteRequestPartition, v, partition_index=3)])])


def _offset_delete_response(cls, v):
    topic_cls = cls.OffsetDeleteResponseTopic
    return cls(version=v, error_code=0, throttle_time_ms=3, topics=[
        _at(topic_cls, v, name="events", partitions=[
            _at(topic_cls.OffsetDeleteResponsePartition, v, partition_index=0, error_code=0),
            _at(topic_cls.OffsetDeleteResponsePartition, v, partition_index=3, error_code=86)])])


def _metadata_request(cls, v):
    return cls(version=v, topics=[_at(cls.MetadataRequestTopic, v, topic_id=TOPIC_ID, name="events")],
               allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
               include_topic_authorized_operations=True)


def _metadata_response(cls, v):
    topic_cls = cls.MetadataResponseTopic
    return cls(version=v, throttle_time_ms=2, cluster_id="kgc-standalone", controller_id=4242,
               authorized_operations={2}, error_code=0,
               brokers=[_at(cls.MetadataResponseBroker, v, node_id=4242, host="kgc.example", port=9092,
                                                   rack="rack-a")],
               topics=[_at(topic_cls, v, error_code=0, name="events", topic_id=TOPIC_ID, is_internal=False,
                                 authorized_operations={3}, partitions=[
                                     _at(topic_cls.MetadataResponsePartition, v, error_code=0, partition_index=0, leader_id=4242,
                                         leader_epoch=3, replica_nodes=[4242], isr_nodes=[4242],
                                         offline_replicas=[])])])


def _consumer_group_heartbeat_request(cls, v):
    return cls(version=v, group_id="orders", member_id="m-1", member_epoch=7, instance_id="i-1", rack_id="rack-a",
               rebalance_timeout_ms=30_000, subscribed_topic_names=["events", "audit"],
               subscribed_topic_regex="events-.*", server_assignor="range", topic_partitions=[
                   _at(cls.TopicPartitions, v, topic_id=TOPIC_ID, partitions=[0, 2])])


def _consumer_group_heartbeat_response(cls, v):
    assignment_cls = cls.Assignment
    return cls(version=v, throttle_time_ms=1, error_code=0, error_message="fine", member_id="m-1", member_epoch=8,
               heartbeat_interval_ms=5000, assignment=_at(assignment_cls, v, topic_partitions=[
                   _at(assignment_cls.TopicPartitions, v, topic_id=TOPIC_ID, partitions=[1, 3])]))


def _consumer_group_describe_request(cls, v):
    return cls(version=v, group_ids=["orders", "payments"], include_authorized_operations=True)


def _consumer_group_describe_response(cls, v):
    group_cls = cls.DescribedGroup
    member_cls = group_cls.Member
    assignment_cls = member_cls.Assignment

    def assignment(*partitions):
        return _at(assignment_cls, v, topic_partitions=[_at(assignment_cls.TopicPartitions, v, topic_id=TOPIC_ID,
                                                            topic_name="events", partitions=list(partitions))])

    return cls(version=v, throttle_time_ms=2, groups=[
        _at(group_cls, v, error_code=0, error_message=None, group_id="orders", group_state="Reconciling",
            group_epoch=5, assignment_epoch=5, assignor_name="uniform", authorized_operations=-2**31, members=[
                _at(member_cls, v, member_id="m-1", instance_id="i-1", rack_id=None, member_epoch=4,
                    client_id="rdkafka", client_host="/127.0.0.1", subscribed_topic_names=["events"],
                    subscribed_topic_regex=None, assignment=assignment(0, 1), target_assignment=assignment(1),
                    member_type=1)]),
        _at(group_cls, v, error_code=69, error_message="Group payments not found.", group_id="payments",
            group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
            authorized_operations=-2**31)])


_REQUESTS = {
    ApiKey.ApiVersions: _api_versions_request,
    ApiKey.FindCoordinator: _find_coordinator_request,
    ApiKey.JoinGroup: _join_group_request,
    ApiKey.Heartbeat: _heartbeat_request,
    ApiKey.LeaveGroup: _leave_group_request,
    ApiKey.SyncGroup: _sync_group_request,
    ApiKey.OffsetCommit: _offset_commit_request,
    ApiKey.OffsetFetch: _offset_fetch_request,
    ApiKey.DescribeGroups: _describe_groups_request,
    ApiKey.ListGroups: _list_groups_request,
    ApiKey.DeleteGroups: _delete_groups_request,
    ApiKey.OffsetDelete: _offset_delete_request,
    ApiKey.Metadata: _metadata_request,
    ApiKey.ConsumerGroupHeartbeat: _consumer_group_heartbeat_request,
    ApiKey.ConsumerGroupDescribe: _consumer_group_describe_request,
}

_RESPONSES = {
    ApiKey.ApiVersions: _api_versions_response,
    ApiKey.FindCoordinator: _find_coordinator_response,
    ApiKey.JoinGroup: _join_group_response,
    ApiKey.Heartbeat: _heartbeat_response,
    ApiKey.LeaveGroup: _leave_group_response,
    ApiKey.SyncGroup: _sync_group_response,
    ApiKey.OffsetCommit: _offset_commit_response,
    ApiKey.OffsetFetch: _offset_fetch_response,
    ApiKey.DescribeGroups: _describe_groups_response,
    ApiKey.ListGroups: _list_groups_response,
    ApiKey.DeleteGroups: _delete_groups_response,
    ApiKey.OffsetDelete: _offset_delete_response,
    ApiKey.Metadata: _metadata_response,
    ApiKey.ConsumerGroupHeartbeat: _consumer_group_heartbeat_response,
    ApiKey.ConsumerGroupDescribe: _consumer_group_describe_response,
}
