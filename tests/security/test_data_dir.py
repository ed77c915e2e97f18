"""The data dir holds member ids, client ids, hosts and offsets: kgc creates it, and every
directory and segment in it, readable by kgc's own user only."""

from __future__ import annotations

import asyncio
import os
import stat

from coordinator.settings import ServerConfig
from tests.support.authorization_requests import commit, partition_errors
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.security import KafkaSocket


async def test_the_data_dir_is_private(tmp_path):
    data_dir = tmp_path / "data" / "kgc"
    previous = os.umask(0o022)          # the usual umask: without care, files come out 0644
    try:
        config = ServerConfig(host="127.0.0.1", port=0, group=TEST_GROUP_CONFIG, data_dir=str(data_dir))
        async with running_kgc(config) as app:
            def commit_one():
                with KafkaSocket(app.port) as s:
                    return partition_errors(s.call(commit("g", {"t": 1})))
            assert await asyncio.to_thread(commit_one) == {"t": 0}
    finally:
        os.umask(previous)
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in [data_dir, *data_dir.rglob("*")]}
    assert any(path.is_file() for path in modes)
    for path, mode in modes.items():
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
