"""Request frames captured from real clients (`capture.py`) decode, re-encode and get answers."""

import re
from pathlib import Path

import pytest
from kafka.protocol.api_header import RequestHeader as KafkaPythonRequestHeader
from kafka.protocol.api_key import ApiKey

from protocol.answers.local import api_versions_response
from protocol.api_keys import LOCAL_VERSIONS, is_flexible
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.framing import FrameReader
from protocol.headers import parse_request_header
from protocol.messages import decode_request, encode_response, response_class
from tests.golden.capture import CLIENTS, frame_file_pattern, snake_name

GOLDEN_DIR = Path(__file__).parent
FILES = sorted(GOLDEN_DIR.glob("*.bin"))
NAME = re.compile(r"(?P<api>[a-z_]+)_request_v(?P<version>\d+)_(?P<client>[a-z-]+)\.bin")
API_BY_SNAKE_NAME = {snake_name(key): key for key in LOCAL_VERSIONS}


def _group_ids(api_key, version, request) -> list[str]:
    """The group ids a request names, for the APIs that name any."""
    if api_key in (ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.LeaveGroup, ApiKey.OffsetCommit):
        return [request.group_id]
    if api_key == ApiKey.OffsetFetch:
        return [g.group_id for g in request.groups] if version >= 8 else [request.group_id]
    if api_key == ApiKey.FindCoordinator:
        return list(request.coordinator_keys) if version >= 4 else [request.key]
    if api_key == ApiKey.DescribeGroups:
        return list(request.groups)
    if api_key == ApiKey.DeleteGroups:
        return list(request.groups_names)
    return []


def _has_unknown_tags(value) -> bool:
    if isinstance(value, list):
        return any(_has_unknown_tags(item) for item in value)
    fields = getattr(type(value), "fields", None)
    if not isinstance(fields, dict):
        return False
    return bool(value.unknown_tags) or any(_has_unknown_tags(getattr(value, name)) for name in fields)


def _read(path: Path):
    match = NAME.fullmatch(path.name)
    assert match, f"{path.name} does not follow <api>_request_v<N>_<client>.bin"
    payloads = FrameReader(1024 * 1024).feed(path.read_bytes())
    assert len(payloads) == 1, "a golden file holds exactly one whole frame"
    return API_BY_SNAKE_NAME[match["api"]], int(match["version"]), match["client"], payloads[0]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("api_key", [ApiKey.ApiVersions, ApiKey.FindCoordinator, ApiKey.JoinGroup])
def test_every_client_was_captured_bootstrapping_and_joining(client, api_key):
    assert list(GOLDEN_DIR.glob(frame_file_pattern(api_key, client)))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_frame_decodes_with_the_expected_header_and_group(path):
    api_key, version, client, payload = _read(path)

    header = parse_request_header(payload)
    request = decode_request(header.api_key, header.api_version, payload[header.header_len:])

    assert (header.api_key, header.api_version) == (api_key, version)
    low, high = LOCAL_VERSIONS[api_key]
    assert low <= version <= high
    assert header.client_id.startswith(f"golden-{client}")
    assert set(_group_ids(api_key, version, request)) <= {f"golden-{client}"}
    if api_key in (ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.OffsetCommit):
        assert _group_ids(api_key, version, request) == [f"golden-{client}"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_frame_re_encodes_to_the_same_bytes(path):
    api_key, version, client, payload = _read(path)
    header = parse_request_header(payload)
    request = decode_request(api_key, version, payload[header.header_len:])
    if _has_unknown_tags(request):
        pytest.skip("kafka-python drops unknown tagged fields on re-encode")

    assert bytes(request.encode()) == payload[header.header_len:]
    theirs = KafkaPythonRequestHeader(request_api_key=header.api_key, request_api_version=header.api_version,
                                      correlation_id=header.correlation_id, client_id=header.client_id)
    assert bytes(theirs.encode(flexible=is_flexible(api_key, version))) == payload[:header.header_len]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_frame_gets_an_answer_its_client_can_read(path):
    api_key, version, client, payload = _read(path)
    header = parse_request_header(payload)
    request = decode_request(api_key, version, payload[header.header_len:])
    if api_key == ApiKey.ApiVersions:
        response = api_versions_response(version, LOCAL_VERSIONS)
    else:
        response = error_response(api_key, version, request, ErrorCode.NOT_COORDINATOR)

    frame = encode_response(header, response, version)

    decoded = response_class(api_key).decode(frame, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == header.correlation_id
    assert decoded.to_dict() == response.to_dict()
