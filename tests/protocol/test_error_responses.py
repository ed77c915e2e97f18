import pytest
from kafka.protocol.api_key import ApiKey

from protocol.answers.local import api_versions_response
from protocol.api_keys import LOCAL_VERSIONS
from protocol.error_responses import api_versions_error_response, error_response
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import encode_response, response_class
from tests.support.protocol_samples import sample_request, served_versions

CODE = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def _partitions(topics):
    return sum(len(topic.partitions) for topic in topics)


# How many error codes each answer carries for the sample request (error_responses' table).
EXPECTED_CODES = {
    ApiKey.ApiVersions: lambda v, request: 1,
    ApiKey.FindCoordinator: lambda v, request: 1 if v < 4 else len(request.coordinator_keys),
    ApiKey.JoinGroup: lambda v, request: 1,
    ApiKey.Heartbeat: lambda v, request: 1,
    ApiKey.LeaveGroup: lambda v, request: 1 if v < 3 else 1 + len(request.members),
    ApiKey.SyncGroup: lambda v, request: 1,
    ApiKey.OffsetCommit: lambda v, request: _partitions(request.topics),
    ApiKey.OffsetFetch: lambda v, request: (sum(len(t.partition_indexes) for t in request.topics) if v < 2
                                            else 1 if v < 8 else len(request.groups)),
    ApiKey.DescribeGroups: lambda v, request: len(request.groups),
    ApiKey.ListGroups: lambda v, request: 1,
    ApiKey.DeleteGroups: lambda v, request: len(request.groups_names),
    ApiKey.OffsetDelete: lambda v, request: 1,
    ApiKey.Metadata: lambda v, request: len(request.topics) + (1 if v >= 13 else 0),
    ApiKey.ConsumerGroupHeartbeat: lambda v, request: 1,
    ApiKey.ConsumerGroupDescribe: lambda v, request: len(request.group_ids),
}

# Needing the request: the code has no top-level home at these versions.
NEEDS_REQUEST = {
    ApiKey.FindCoordinator: lambda v: v >= 4,
    ApiKey.OffsetCommit: lambda v: True,
    ApiKey.OffsetFetch: lambda v: v < 2 or v >= 8,
    ApiKey.DescribeGroups: lambda v: True,
    ApiKey.DeleteGroups: lambda v: True,
    ApiKey.Metadata: lambda v: v < 13,
    ApiKey.ConsumerGroupDescribe: lambda v: True,
}


def _error_codes(value) -> list[int]:
    """Every `error_code` in a decoded response, at any depth."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code":
                found.append(item)
            else:
                found.extend(_error_codes(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_error_codes(item))
    return found


def _decode_frame(api_key, version, response):
    header = RequestHeader(api_key, version, 77, "tests", 0)
    frame = encode_response(header, response, response.version)
    return response_class(api_key).decode(frame, version=response.version, header=True, framed=True)


@pytest.mark.parametrize("case", served_versions(), ids=lambda c: f"{ApiKey(c[0]).name}-v{c[1]}")
def test_error_response_carries_the_code_everywhere_the_api_puts_errors(case):
    api_key, version = case
    request = sample_request(api_key, version)

    response = error_response(api_key, version, request, CODE)

    decoded = _decode_frame(api_key, version, response)
    codes = _error_codes(decoded.to_dict())
    assert codes == [CODE] * EXPECTED_CODES[api_key](version, request)


@pytest.mark.parametrize("case", served_versions(), ids=lambda c: f"{ApiKey(c[0]).name}-v{c[1]}")
def test_error_response_without_the_request_works_where_the_code_has_a_top_level_home(case):
    api_key, version = case
    if NEEDS_REQUEST.get(api_key, lambda v: False)(version):
        with pytest.raises(ValueError, match="the request is needed"):
            error_response(api_key, version, None, ErrorCode.UNSUPPORTED_VERSION)
        return

    response = error_response(api_key, version, None, ErrorCode.UNSUPPORTED_VERSION)

    codes = _error_codes(_decode_frame(api_key, version, response).to_dict())
    assert codes and set(codes) == {ErrorCode.UNSUPPORTED_VERSION}


def test_offset_commit_error_mirrors_every_requested_partition():
    request = sample_request(ApiKey.OffsetCommit, 8)

    response = error_response(ApiKey.OffsetCommit, 8, request, ErrorCode.NOT_COORDINATOR)

    got = [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]
    assert got == [("events", 0, 16), ("events", 3, 16), ("audit", 1, 16)]


def test_offset_fetch_v1_error_reports_unknown_offsets_per_partition():
    request = sample_request(ApiKey.OffsetFetch, 1)

    response = error_response(ApiKey.OffsetFetch, 1, request, ErrorCode.NOT_COORDINATOR)

    got = [(t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
           for t in response.topics for p in t.partitions]
    assert got == [("events", 0, -1, "", 16), ("events", 3, -1, "", 16), ("audit", 1, -1, "", 16)]


def test_offset_fetch_v8_error_is_per_group():
    request = sample_request(ApiKey.OffsetFetch, 8)

    response = error_response(ApiKey.OffsetFetch, 8, request, ErrorCode.NOT_COORDINATOR)

    assert [(g.group_id, g.error_code, g.topics) for g in response.groups] == [
        ("orders", 16, []), ("payments", 16, [])]


def test_find_coordinator_v4_error_names_every_key_and_no_node():
    request = sample_request(ApiKey.FindCoordinator, 4)

    response = error_response(ApiKey.FindCoordinator, 4, request, CODE, "loading")

    assert [(c.key, c.node_id, c.host, c.port, c.error_code, c.error_message) for c in response.coordinators] == [
        ("orders", -1, "", -1, CODE, "loading"), ("payments", -1, "", -1, CODE, "loading")]


def test_leave_group_v3_error_is_top_level_and_per_member():
    request = sample_request(ApiKey.LeaveGroup, 3)

    response = error_response(ApiKey.LeaveGroup, 3, request, ErrorCode.UNKNOWN_MEMBER_ID)

    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
        ("consumer-1-5b1e", "instance-a", 25), ("", "instance-b", 25)]


@pytest.mark.parametrize("version, protocol_name", [(6, ""), (7, None)])
def test_join_group_error_protocol_name_is_null_from_v7(version, protocol_name):
    response = error_response(ApiKey.JoinGroup, version, None, ErrorCode.UNSUPPORTED_VERSION)
    decoded = _decode_frame(ApiKey.JoinGroup, version, response)
    assert decoded.protocol_name == protocol_name
    assert (decoded.generation_id, decoded.member_id, decoded.leader, decoded.members) == (-1, "", "", [])


def test_describe_groups_error_omits_authorized_operations():
    request = sample_request(ApiKey.DescribeGroups, 3)
    response = error_response(ApiKey.DescribeGroups, 3, request, ErrorCode.NOT_COORDINATOR)
    frame = encode_response(RequestHeader(ApiKey.DescribeGroups, 3, 1, None, 0), response, 3)
    # last 4 bytes of the second group: authorized_operations = INT32 MIN ("omitted")
    assert frame.endswith(b"\x80\x00\x00\x00")


def test_error_response_refuses_unknown_apis_and_versions_beyond_the_codec():
    with pytest.raises(KeyError):
        error_response(ApiKey.Produce, 9, None, ErrorCode.UNSUPPORTED_VERSION)
    with pytest.raises(ValueError, match="cannot be encoded at v10"):
        error_response(ApiKey.JoinGroup, 10, None, ErrorCode.UNSUPPORTED_VERSION)


def test_kip_511_answer_is_v0_with_only_the_api_versions_range():
    response = api_versions_error_response()

    header = RequestHeader(ApiKey.ApiVersions, 7, 1234, "future-client", 0)
    frame = encode_response(header, response, response.version)

    assert response.version == 0
    # size, correlation id (header v0), error 35, array of one: (18, 0, 4)
    assert frame == bytes.fromhex("00000010" "000004d2" "0023" "00000001" "0012" "0000" "0004")


def test_api_versions_error_at_any_version_is_the_v0_answer():
    for version in range(0, 5):
        response = error_response(ApiKey.ApiVersions, version, None, ErrorCode.INVALID_REQUEST)
        assert response.version == 0
        assert response.error_code == ErrorCode.INVALID_REQUEST
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_response_lists_the_given_ranges_sorted(version):
    ranges = {ApiKey.JoinGroup: (0, 9), ApiKey.Produce: (3, 11), ApiKey.ApiVersions: (0, 4)}

    response = api_versions_response(version, ranges)

    decoded = _decode_frame(ApiKey.ApiVersions, version, response)
    assert decoded.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [
        (0, 3, 11), (11, 0, 9), (18, 0, 4)]


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_response_carries_the_upstreams_features_from_v3_and_answers_older_versions_without(version):
    # the features come with every answer in front of an upstream; v0-2 have no place for them
    response = api_versions_response(version, {ApiKey.ApiVersions: (0, 4)},
                                     supported_features=[("transaction.version", 0, 2)],
                                     finalized_features=[("transaction.version", 2, 2)], features_epoch=7)
    decoded = _decode_frame(ApiKey.ApiVersions, version, response)
    assert [(k.api_key, k.max_version) for k in decoded.api_keys] == [(18, 4)]
    if version >= 3:
        assert [(f.name, f.max_version_level) for f in decoded.finalized_features] == [("transaction.version", 2)]
        assert decoded.finalized_features_epoch == 7


def test_api_versions_response_for_our_table_lists_every_local_api():
    response = api_versions_response(3, LOCAL_VERSIONS)
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == dict(LOCAL_VERSIONS)
