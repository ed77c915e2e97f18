"""The load generator's hand-made bytes against kafka-python's codecs, and its percentiles."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from coordinator.bench import messages
from coordinator.bench.stats import Latencies
from coordinator.bench.targets import Target, Unsupported
from coordinator.bench.wire import Template


@pytest.mark.parametrize(("group", "topic", "partitions", "offset"), [
    ("g", "t", 1, 0),
    ("bench-commit-1a2b3c4d-7", "bench-topic", 50, 123_456_789_012),
    ("grüppe", "töpic", 3, 2**62),
])
def test_offset_commit_encoder_matches_kafka_python_byte_for_byte(group, topic, partitions, offset):
    encoder = messages.OffsetCommitEncoder(group, topic, partitions)
    expected = messages.encode(messages.offset_commit_request(group, topic, partitions, offset), 77)
    assert encoder.frame(77, offset) == expected


def test_offset_commit_encoder_from_a_first_partition_matches_kafka_python():
    encoder = messages.OffsetCommitEncoder("g", "t", 2, first=4)
    request = messages.offset_commit_request("g", "t", 2, 9, first=4)
    assert [p.partition_index for p in request.topics[0].partitions] == [4, 5]
    assert encoder.frame(5, 9) == messages.encode(request, 5)


def test_offset_commit_errors_counts_each_failed_partition():
    cls = OffsetCommitResponse[messages.VERSIONS[OffsetCommitResponse.API_KEY]]
    topic_cls = cls.OffsetCommitResponseTopic
    partition_cls = topic_cls.OffsetCommitResponsePartition
    response = cls(throttle_time_ms=0, topics=[
        topic_cls(name="a", partitions=[partition_cls(partition_index=i, error_code=0) for i in range(4)]),
        topic_cls(name="bb", partitions=[partition_cls(partition_index=0, error_code=3),
                                         partition_cls(partition_index=1, error_code=0),
                                         partition_cls(partition_index=2, error_code=22)]),
    ])
    payload = b"\x00\x00\x00\x05" + bytes(response.encode())
    assert messages.offset_commit_errors(payload) == (7, 2)


def test_template_resends_the_same_request_under_a_new_correlation_id():
    template = messages.heartbeat_template("g", 3, "member-1")
    request = HeartbeatRequest[messages.VERSIONS[HeartbeatRequest.API_KEY]](
        group_id="g", generation_id=3, member_id="member-1", group_instance_id=None)
    assert template.frame(4242) == messages.encode(request, 4242)
    assert Template(template.frame(1)).frame(2) == template.frame(2)


def test_heartbeat_and_offset_fetch_error_peeks_read_the_error_code():
    heartbeat = HeartbeatResponse[messages.VERSIONS[HeartbeatResponse.API_KEY]](throttle_time_ms=0, error_code=27)
    assert messages.heartbeat_error(b"\x00\x00\x00\x01" + bytes(heartbeat.encode())) == 27
    fetch_cls = OffsetFetchResponse[messages.VERSIONS[OffsetFetchResponse.API_KEY]]
    topic_cls = fetch_cls.OffsetFetchResponseTopic
    fetch = fetch_cls(throttle_time_ms=0, error_code=14, topics=[topic_cls(name="t", partitions=[
        topic_cls.OffsetFetchResponsePartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                               metadata="", error_code=0)])])
    assert messages.offset_fetch_error(b"\x00\x00\x00\x01" + bytes(fetch.encode())) == 14


def test_consumer_protocol_bytes_decode_as_kafka_consumer_protocol_v0():
    subscription = ConsumerProtocolSubscription.decode(messages.subscription("bench-topic"), version=0)
    assert subscription.topics == ["bench-topic"]
    assignment = ConsumerProtocolAssignment.decode(messages.assignment("bench-topic", [1, 4, 7]), version=0)
    assert assignment.partitions() == [("bench-topic", 1), ("bench-topic", 4), ("bench-topic", 7)]


def test_missing_versions_names_each_api_the_target_does_not_serve_at_our_version():
    advertised = {11: (0, 9), 14: (4, 5), 12: (0, 4)}
    assert messages.missing_versions(advertised, [messages.ApiKey.JoinGroup, messages.ApiKey.SyncGroup,
                                                  messages.ApiKey.Heartbeat, messages.ApiKey.LeaveGroup]) == [
        "SyncGroup v3", "LeaveGroup v1"]


def test_percentiles_are_nearest_rank_in_milliseconds():
    latencies = Latencies()
    for ms in range(1, 101):
        latencies.add(ms * 1_000_000)
    assert latencies.percentile_ms(50) == 50.0
    assert latencies.percentile_ms(99) == 99.0
    assert latencies.percentile_ms(100) == 100.0
    assert Latencies().percentile_ms(50) is None


def test_a_target_without_our_version_is_refused_before_a_workload_runs():
    target = Target("external", "127.0.0.1", 1, "", advertised={11: (0, 4), 14: (0, 5), 12: (0, 4)})
    target.require(messages.ApiKey.SyncGroup, messages.ApiKey.Heartbeat)
    with pytest.raises(Unsupported, match="JoinGroup v5"):
        target.require(messages.ApiKey.JoinGroup, messages.ApiKey.SyncGroup)
