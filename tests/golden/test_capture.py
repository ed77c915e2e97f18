"""The capture script still gets every client through bootstrap and a group join."""

import pytest
from kafka.protocol.api_key import ApiKey

from tests.golden.capture import CLIENTS, capture, frame_file_pattern


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_capture_records_bootstrap_and_join_of_every_client(tmp_path):
    written = capture(tmp_path, timeout_s=15)

    for client in CLIENTS:
        for api_key in (ApiKey.ApiVersions, ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.SyncGroup,
                        ApiKey.OffsetCommit):
            pattern = frame_file_pattern(api_key, client)
            assert any(path.match(pattern) for path in written), (pattern, sorted(p.name for p in written))
