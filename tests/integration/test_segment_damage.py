"""Damage to closed segments against `kgc serve`: a segment deleted while kgc is down, or
unlinked while it runs, fails that partition only, with /readyz naming the file, byte and
offsets; `kgc inspect` shows it; `kgc repair --accept-loss` brings the partition back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest

from coordinator.partitioning import partition_for
from storage.file_store import partition_dir
from storage.segment import parse_segment_name
from tests.support.builders import commit_request
from tests.support.kgc import free_port, kgc_process
from tests.support.kgc_http import get_json
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP = "damaged-group"
OTHER = "healthy-group"
COMMITS = 40


def kgc(tmp_path, *extra: str):
    http = free_port()
    proc = kgc_process("--data-dir", str(tmp_path / "data"), "--segment-bytes", "1024", "--http-port", str(http),
                       *extra, log_path=str(tmp_path / "kgc.log"))
    return proc, http


async def commit(port: int, group: str, offset: int) -> int:
    client = await WireClient.open(port, "committer")
    try:
        response = await client.call(commit_request(8, group, (("t", 0, offset, None),)))
        return response.topics[0].partitions[0].error_code
    finally:
        client.close()


async def committed(port: int, group: str) -> int:
    client = await WireClient.open(port, "fetcher")
    try:
        t = OffsetFetchRequest.OffsetFetchRequestTopic(version=7, name="t", partition_indexes=[0])
        response = await client.call(OffsetFetchRequest(version=7, group_id=group, topics=[t], require_stable=False))
        return response.topics[0].partitions[0].committed_offset
    finally:
        client.close()


def segments(tmp_path) -> list[str]:
    directory = partition_dir(tmp_path / "data", partition_for(GROUP, 50))
    return sorted(n for n in os.listdir(directory) if parse_segment_name(n) is not None)


def kgc_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=60)


async def readyz(http: int) -> tuple[int, dict]:
    return await get_json(http, "/readyz")


async def test_a_closed_segment_deleted_while_down_fails_its_partition_until_repaired(tmp_path):
    partition = partition_for(GROUP, 50)
    assert partition_for(OTHER, 50) != partition
    server, http = kgc(tmp_path)
    with server as proc:
        for i in range(COMMITS):
            assert await commit(proc.port, GROUP, i) == 0
    names = segments(tmp_path)
    assert len(names) >= 4, names
    middle = partition_dir(tmp_path / "data", partition) / names[1]
    os.unlink(middle)

    server, http = kgc(tmp_path)
    with server as proc:
        status, body = await readyz(http)
        assert status == 503
        reason = next(r for r in body["reasons"] if r.startswith(f"partition {partition}:"))
        assert str(middle) in reason and "at byte 0" in reason and "lost" in reason
        assert await commit(proc.port, OTHER, 7) == 0      # the other partitions serve
        assert await commit(proc.port, GROUP, 99) == 16    # NOT_COORDINATOR: refused, not silently loaded
    inspected = kgc_cli("inspect", str(tmp_path / "data"), "--partition", str(partition), "--state-only")
    assert inspected.returncode == 1 and "DAMAGED" in inspected.stdout and str(middle) in inspected.stdout

    repaired = kgc_cli("repair", str(tmp_path / "data"), "--accept-loss", str(partition))
    assert repaired.returncode == 0, repaired.stderr
    assert "lost" in repaired.stdout
    server, http = kgc(tmp_path)
    with server as proc:
        status, body = await readyz(http)
        assert status == 200, body
        assert await committed(proc.port, GROUP) == COMMITS - 1
        assert await commit(proc.port, GROUP, 100) == 0


async def test_a_closed_segment_unlinked_while_running_fails_its_partition(tmp_path):
    partition = partition_for(GROUP, 50)
    server, http = kgc(tmp_path, "--cleaner-interval-ms", "200")
    with server as proc:
        for i in range(COMMITS):
            assert await commit(proc.port, GROUP, i) == 0
        names = segments(tmp_path)
        victim = partition_dir(tmp_path / "data", partition) / names[1]
        os.unlink(victim)

        async def failed() -> bool:
            status, body = await readyz(http)
            return status == 503 and any(str(victim) in r for r in body["reasons"])

        for _ in range(100):
            if await failed():
                break
            await asyncio.sleep(0.1)
        assert await failed()
        assert await commit(proc.port, OTHER, 1) == 0
    log = (tmp_path / "kgc.log").read_text()
    assert str(victim) in log and "lost" in log


async def test_inspect_reads_a_running_kgcs_preallocated_data_dir_whole(tmp_path):
    # Under `--fsync always` (the default) the active segment ends in preallocated zeros
    # while kgc runs; the rolled ones were cut to their logs before the manifest took them.
    partition = partition_for(GROUP, 50)
    server, _http = kgc(tmp_path)
    with server as proc:
        for i in range(COMMITS):
            assert await commit(proc.port, GROUP, i) == 0
        directory = partition_dir(tmp_path / "data", partition)
        names = segments(tmp_path)
        assert len(names) >= 4, names
        assert all(os.path.getsize(directory / name) <= 1024 for name in names[:-1])
        assert os.path.getsize(directory / names[-1]) == 1024      # preallocated up to the segment size
        inspected = kgc_cli("inspect", str(tmp_path / "data"), "--partition", str(partition), "--state-only")
        assert inspected.returncode == 0, inspected.stdout + inspected.stderr
        assert "DAMAGED" not in inspected.stdout and "torn tail" not in inspected.stdout
        assert f"offset {COMMITS - 1}" in inspected.stdout
