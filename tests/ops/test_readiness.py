"""/healthz and /readyz: alive throughout, ready only once every partition is loaded."""

from __future__ import annotations

import asyncio

import pytest

from coordinator import records
from coordinator.app import KgcApp
from coordinator.partitioning import partition_for
from coordinator.runtime.loader import LOAD_CHUNK_RECORDS
from coordinator.settings import ServerConfig
from storage.file_store import FileLogStore
from tests.support.data_dirs import bound_by_file_modes, made_by_kgc, make_writable, read_only_partitions
from tests.support.kgc import TEST_GROUP_CONFIG, free_port, kgc_process
from tests.support.kgc_http import get_json
from tests.support.log_records import log_record

pytestmark = [pytest.mark.integration]

GROUP = "slow-to-load"
# Loading yields to the event loop once per LOAD_CHUNK_RECORDS records: this many chunks
# in one partition keep it LOADING for far more loop turns than an HTTP round trip takes.
CHUNKS = 25
BATCH_RECORDS = 1_000


async def write_log(data_dir) -> int:
    store = FileLogStore(data_dir, fsync="never")
    await store.open()
    partition = partition_for(GROUP)
    total = CHUNKS * LOAD_CHUNK_RECORDS
    for start in range(0, total, BATCH_RECORDS):
        batch = [log_record(records.new_offset_commit_record(
            GROUP, "t", i % 100, records.OffsetCommitValue(i, -1, "", 0))) for i in range(start, start + BATCH_RECORDS)]
        await store.append(partition, batch, 0).durable
    await store.close()
    return total


@pytest.mark.timeout(60)
async def test_readyz_is_false_while_partitions_load_and_true_after(tmp_path):
    await write_log(tmp_path)
    app = KgcApp(ServerConfig(host="127.0.0.1", port=0, data_dir=str(tmp_path), http_port=0,
                              group=TEST_GROUP_CONFIG))
    await app.start()
    try:
        seen = []
        for _ in range(2_000):
            status, body = await get_json(app.http.port, "/readyz")
            seen.append((status, body))
            if status == 200:
                break
        else:
            raise AssertionError("never ready")
        health, _ = await get_json(app.http.port, "/healthz")
    finally:
        await app.stop()

    first_status, first = seen[0]
    assert first_status == 503 and not first["ready"]
    assert first["partitions"]["loading"] == 1 and first["partitions"]["active"] == 49
    assert first["reasons"] == ["partitions not active: 1 loading"]
    last_status, last = seen[-1]
    assert last == {"ready": True, "reasons": [], "partitions": {"active": 50}, "upstream": None,
                    "warnings": []}
    assert health == 200


@pytest.mark.timeout(30)
async def test_readyz_says_so_while_shutting_down_and_healthz_stays_up(tmp_path):
    app = KgcApp(ServerConfig(host="127.0.0.1", port=0, http_port=0, group=TEST_GROUP_CONFIG))
    await app.start()
    await app.runtime.wait_loaded()
    try:
        app.stopping = True     # what stop() sets first, before it drains
        status, body = await get_json(app.http.port, "/readyz")
        health, _ = await get_json(app.http.port, "/healthz")
    finally:
        await app.stop()
    assert status == 503 and body["reasons"] == ["shutting down"] and health == 200


@pytest.mark.timeout(60)
def test_partitions_that_fail_to_load_are_counted_loudly_in_the_log_and_in_readyz(tmp_path):
    # Three partitions' files cannot be written (restored from a backup another user owns,
    # say): those are refused, the other 47 serve, and kgc says how many cannot.
    data_dir, log_path, http_port = made_by_kgc(tmp_path / "data"), tmp_path / "kgc.log", free_port()
    unwritable = (3, 17, 41)
    read_only_partitions(data_dir, unwritable)
    try:
        with kgc_process("--data-dir", str(data_dir), "--http-port", str(http_port), log_path=str(log_path),
                         popen=bound_by_file_modes()):
            status, body = asyncio.run(_readiness_once_loaded(http_port))
    finally:
        make_writable(data_dir)
    assert status == 503 and body["partitions"] == {"active": 47, "failed": 3}
    assert "3 of 50 partitions failed to load: the groups they hold cannot be served" in body["reasons"]
    assert [r.split(":")[0] for r in body["reasons"] if r.startswith("partition ")] == [
        f"partition {p}" for p in unwritable]
    [summary] = [line for line in log_path.read_text().splitlines() if "partitions failed to load" in line]
    assert " ERROR " in summary and "3 of 50 partitions failed to load" in summary, summary


async def _readiness_once_loaded(port: int) -> tuple[int, dict]:
    while True:
        status, body = await get_json(port, "/readyz")
        if body["partitions"] and "loading" not in body["partitions"]:
            return status, body
        await asyncio.sleep(0.05)
