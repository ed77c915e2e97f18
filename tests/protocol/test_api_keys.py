from kafka.protocol.api_key import ApiKey

from protocol.api_keys import (
    GROUP_API_FLOORS,
    LOCAL_VERSIONS,
    is_flexible,
    local_versions,
    response_header_version,
)
from protocol.messages import request_class


def test_local_ranges_are_the_decided_ones():
    assert {ApiKey(k).name: v for k, v in LOCAL_VERSIONS.items()} == {
        "ApiVersions": (0, 4), "FindCoordinator": (0, 6), "JoinGroup": (0, 9), "Heartbeat": (0, 4),
        "LeaveGroup": (0, 5), "SyncGroup": (0, 5), "OffsetCommit": (0, 10), "OffsetFetch": (0, 10),
        "DescribeGroups": (0, 6), "ListGroups": (0, 5), "DeleteGroups": (0, 2), "OffsetDelete": (0, 0),
        "Metadata": (0, 12), "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 1)}


def test_kafka_3_floor_serves_every_version_and_kafka_4_floor_cuts_what_kip_896_removed():
    assert local_versions("kafka3") == LOCAL_VERSIONS
    kafka4 = local_versions("kafka4")
    assert {ApiKey(k).name: v for k, v in kafka4.items() if v != LOCAL_VERSIONS[k]} == {
        "OffsetCommit": (2, 10), "OffsetFetch": (1, 10)}
    assert set(GROUP_API_FLOORS) == {"kafka3", "kafka4"}


def test_kafka_4_floor_matches_the_removals_in_kafka_pythons_4x_schemas():
    """The schemas kafka-python ships are Kafka 4.x's: their validVersions start where
    KIP-896 left each API kgc serves."""
    for api_key, (low, _high) in local_versions("kafka4").items():
        schema_low = int(request_class(api_key).json["validVersions"].split("-")[0])
        assert low == schema_low, ApiKey(api_key).name


def test_flexibility_of_local_apis_matches_kafka_pythons_schemas():
    for api_key, (low, high) in LOCAL_VERSIONS.items():
        for version in range(low, high + 1):
            assert is_flexible(api_key, version) == request_class(api_key).flexible_version_q(version)


def test_first_flexible_versions_of_forwarded_apis():
    assert (is_flexible(ApiKey.Produce, 8), is_flexible(ApiKey.Produce, 9)) == (False, True)
    assert (is_flexible(ApiKey.Fetch, 11), is_flexible(ApiKey.Fetch, 12)) == (False, True)
    assert is_flexible(ApiKey.SaslHandshake, 1) is False  # "flexibleVersions": "none"
    assert is_flexible(ApiKey.ConsumerGroupHeartbeat, 0) is True  # not shipped by kafka-python
    assert is_flexible(ApiKey.LeaderAndIsr, 7) is None  # inter-broker, gone in Kafka 4
    assert is_flexible(999, 0) is None


def test_response_header_of_api_versions_is_always_v0():
    assert [response_header_version(ApiKey.ApiVersions, v) for v in range(0, 6)] == [0] * 6
    assert response_header_version(ApiKey.Heartbeat, 3) == 0
    assert response_header_version(ApiKey.Heartbeat, 4) == 1
