"""An OffsetCommit as large as the frame limit allows, over real sockets: it is decided,
serialized, replayed and prepared a slice at a time while the partition's executor is
its own (finding 5 of the hardening issue), so a healthy member keeps being answered
meanwhile; and it is still one batch: every offset lands, survives kill -9, or none does.
An OffsetDelete of as many partitions takes the same path."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest

from coordinator.group import offsets
from coordinator.group.shard import GroupShard
from coordinator.partitioning import partition_for
from coordinator.records import OffsetCommitKey
from protocol.errors import ErrorCode
from tests.support.builders import commit_request, offset_delete_request
from tests.support.healthy_group import kgc_with_healthy_group
from tests.support.kgc import KgcProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PARTITIONS = 40_000     # 40 slices to decide, 20 to replay and to prepare
DURABLE_PARTITIONS = 5_000  # still sliced, and quicker to fetch twice


def group_apart_from(other: str, prefix: str) -> str:
    """A group id on another `__consumer_offsets` partition than `other`'s."""
    return next(g for g in (f"{prefix}-{i}" for i in itertools.count())
                if partition_for(g, 50) != partition_for(other, 50))


def huge_commit(group: str, partitions: int = PARTITIONS, **kw):
    return commit_request(8, group, [("t", p, 3 * p, None) for p in range(partitions)], **kw)


def answered_codes(response) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


async def test_a_healthy_member_is_answered_while_a_huge_commit_is_decided_and_replayed(monkeypatch):
    big = group_apart_from("healthy", "huge")
    made, replayed = [0], [0]
    make_records, replay = offsets.new_offset_commit_records, GroupShard.replay

    def counting_records(group_id, *args, **kw):
        out = make_records(group_id, *args, **kw)
        made[0] += len(out) if group_id == big else 0
        return out

    def counting_replay(shard, offset, record):
        if isinstance(record.key, OffsetCommitKey) and record.key.group == big:
            replayed[0] += 1
        replay(shard, offset, record)

    monkeypatch.setattr(offsets, "new_offset_commit_records", counting_records)
    monkeypatch.setattr(GroupShard, "replay", counting_replay)
    async with kgc_with_healthy_group("healthy") as (app, healthy):
        attacker = await WireClient.open(app.port, "attacker")
        answer = attacker.send(huge_commit(big))
        # The healthy member heartbeats back to back until the commit is answered, noting
        # how far the commit had got at each answer.
        progress = []
        while not answer.done():
            assert await healthy.heartbeat() == ErrorCode.NONE
            progress.append((made[0], replayed[0]))
        assert answered_codes(await answer) == [ErrorCode.NONE] * PARTITIONS
        assert made[0] == replayed[0] == PARTITIONS
        # Answered while the commit was half decided, and while it was half replayed: in
        # one atomic step neither count is ever seen between 0 and the whole.
        assert any(0 < m < PARTITIONS for m, _ in progress), progress
        assert any(0 < r < PARTITIONS for _, r in progress), progress
        attacker.close()


async def fetch_all(port: int, group: str) -> dict[int, int]:
    """Every committed offset of `group`, once its partition has loaded."""
    client = await WireClient.open(port, "fetcher")
    deadline = time.monotonic() + 15
    while True:
        fetched = await client.call(OffsetFetchRequest(version=8, require_stable=False, groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]))
        (answer,) = fetched.groups
        if answer.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    client.close()
    assert answer.error_code == ErrorCode.NONE
    return {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions}


async def test_a_huge_commit_and_a_huge_offset_delete_land_whole_and_survive_kill_9(tmp_path):
    data_dir = tmp_path / "data"
    kgc = KgcProcess("--data-dir", str(data_dir), "--fsync", "always", "--max-frame-bytes", str(8 * 2**20),
                     log_path=str(tmp_path / "kgc.log")).start()
    try:
        client = await WireClient.open(kgc.port, "committer")
        # refused as a whole (no such group at generation 7): every partition says so, nothing is written
        refused = await client.call(huge_commit("huge-refused", DURABLE_PARTITIONS, generation_id=7, member_id="m"))
        assert answered_codes(refused) == [ErrorCode.ILLEGAL_GENERATION] * DURABLE_PARTITIONS
        for group in ("huge", "huge-deleted"):
            committed = await client.call(huge_commit(group, DURABLE_PARTITIONS))
            assert answered_codes(committed) == [ErrorCode.NONE] * DURABLE_PARTITIONS
        # an OffsetDelete of as many partitions takes the same sliced path: a tombstone each
        deleted = await client.call(offset_delete_request("huge-deleted", (("t", range(DURABLE_PARTITIONS)),)))
        assert deleted.error_code == ErrorCode.NONE and answered_codes(deleted) == [0] * DURABLE_PARTITIONS
        client.close()
        expected = {p: 3 * p for p in range(DURABLE_PARTITIONS)}
        assert await fetch_all(kgc.port, "huge") == expected
        assert await fetch_all(kgc.port, "huge-deleted") == {}
        kgc.kill()
        kgc.start()
        assert await fetch_all(kgc.port, "huge") == expected
        assert await fetch_all(kgc.port, "huge-deleted") == {}
        assert await fetch_all(kgc.port, "huge-refused") == {}
    finally:
        kgc.stop()
    assert b"Traceback" not in (tmp_path / "kgc.log").read_bytes()
