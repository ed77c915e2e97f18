"""Offline compaction (plain-Python engine): same state out as in, a log kgc can serve."""

from __future__ import annotations

import asyncio
import copy
import pickle
import shutil

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.shard import GroupShard
from coordinator.offline.cli import main
from coordinator.offline.compact import CompactionRefused
from coordinator.offline.findings import FindingType
from coordinator.offline.job import Options, PartitionResult
from coordinator.offline.runner import audit, compact
from coordinator.offline.scan import PartitionScan, segment_files
from coordinator.offline.state import replay_state
from coordinator.runtime.loader import KafkaRecordSerde, load_partition
from storage.compaction import CompactionStats
from storage.file_store import FileLogStore, partition_dirs
from tests.support.audit_logs import CLEAN, DAY_MS
from tests.support.clock import ManualClock
from tests.support.manual_timer import ManualTimer


def tombstones(data_dir) -> int:
    return sum(1 for p, d in partition_dirs(data_dir).items() for s in PartitionScan(p, d)
               for r in s.batch.records if r.value is None)


def test_compacted_log_loads_into_the_same_state(clean, tmp_path):
    directory, manifest = clean
    run = compact(directory, tmp_path / "out", Options(now_ms=CLEAN.now_ms, segment_bytes=16 * 1024))
    before, after = replay_state(directory), replay_state(tmp_path / "out")
    assert after.offsets == before.offsets and len(after.offsets) > 50
    assert after.groups == before.groups and len(after.groups) > 10
    assert after.next_offsets == before.next_offsets == manifest.next_offsets
    assert run.totals["records_after"] < run.totals["records_before"] / 5
    # Deleted groups' tombstones are younger than the retention: still there.
    assert tombstones(tmp_path / "out") == tombstones(directory) > 0


def test_tombstones_past_the_retention_are_dropped_and_state_is_unchanged(clean, tmp_path):
    directory, _manifest = clean
    compact(directory, tmp_path / "out", Options(now_ms=CLEAN.now_ms + 2 * DAY_MS, delete_retention_ms=DAY_MS))
    assert tombstones(tmp_path / "out") == 0
    before, after = replay_state(directory), replay_state(tmp_path / "out")
    assert (after.offsets, after.groups, after.next_offsets) == (before.offsets, before.groups, before.next_offsets)


def test_segments_roll_at_the_size_and_end_with_an_empty_active_segment(clean, tmp_path):
    directory, manifest = clean
    compact(directory, tmp_path / "out", Options(now_ms=CLEAN.now_ms, segment_bytes=2048))
    rolled = 0
    for partition, d in partition_dirs(tmp_path / "out").items():
        segments = segment_files(d)
        *closed, (active_base, active) = segments
        assert active.stat().st_size == 0 and active_base == manifest.next_offsets[partition]
        rolled += len(closed) > 1
        # A segment exceeds the size only when its one batch alone does.
        assert all(path.stat().st_size <= 2048 or _batches(partition, path) == 1 for _b, path in closed)
    assert rolled > 5


def _batches(partition: int, path) -> int:
    return sum(1 for s in PartitionScan(partition, path.parent) if s.segment == path.name)


def test_kgc_loads_the_compacted_data_dir(clean, tmp_path):
    """What `kgc serve --data-dir` does at start: open the store, replay every partition."""
    directory, _manifest = clean
    compact(directory, tmp_path / "out", Options(now_ms=CLEAN.now_ms))
    expected = replay_state(directory)

    async def load() -> dict:
        store = FileLogStore(tmp_path / "out", num_partitions=50, fsync="never")
        await store.open()
        loaded = {}
        try:
            for p in range(50):
                assert store.partition_error(p) is None
                assert store.end_offset(p) == expected.next_offsets[p]
                clock = ManualClock(CLEAN.now_ms)
                shard = GroupShard(p, GroupConfig(), ManualTimer(clock.now_ms), clock.now_ms, lambda c: c)
                await load_partition(store, p, shard, KafkaRecordSerde())
                for group_id, by_topic in shard.offsets.committed.items():
                    for topic, parts in by_topic.items():
                        for partition, value in parts.items():
                            loaded[group_id, topic, partition] = value
        finally:
            await store.close()
        return loaded

    assert asyncio.run(load()) == expected.offsets


def test_refuses_a_damaged_data_dir(dirty, tmp_path):
    directory, _manifest = dirty
    with pytest.raises(CompactionRefused, match="kgc audit"):
        compact(directory, tmp_path / "out", Options(now_ms=CLEAN.now_ms))
    assert main(["compact", str(directory), "--out", str(tmp_path / "cli"), "--engine", "python"]) == 1


def test_cli_compacts_and_verifies(clean, tmp_path, capsys):
    directory, _manifest = clean
    code = main(["compact", str(directory), "--out", str(tmp_path / "out"), "--engine", "python", "--verify",
                 "--now-ms", str(CLEAN.now_ms)])
    assert code == 0
    assert "verify: same state" in capsys.readouterr().out
    assert (tmp_path / "out" / "COMPACTED.json").exists()
    with pytest.raises(FileExistsError):
        compact(directory, tmp_path / "out", Options(now_ms=CLEAN.now_ms))


def test_bytes_a_recovery_cut_off_are_reported_but_do_not_block_compaction(clean, tmp_path):
    pytest.importorskip("pyarrow", reason="the audit half needs pyarrow (pip install -e '.[spark]')")
    directory, _manifest = clean
    copy = tmp_path / "data"
    shutil.copytree(directory, copy)
    partition = next(iter(partition_dirs(copy).values()))
    _base, active = segment_files(partition)[-1]
    (partition / (active.name + ".torn-1")).write_bytes(b"\x00" * 30)
    compact(copy, tmp_path / "out", Options(now_ms=CLEAN.now_ms))
    assert replay_state(tmp_path / "out").offsets == replay_state(directory).offsets
    run = audit(copy, tmp_path / "report", Options(now_ms=CLEAN.now_ms))
    assert [(f.type, f.segment) for r in run.results for f in r.findings] == \
        [(FindingType.TORN_BATCH, active.name + ".torn-1")]


def test_an_adopted_group_deleted_on_kgc_stays_adopted_through_compaction(tmp_path):
    """Its AdoptedGroup record has no tombstone: compaction past every tombstone's
    retention leaves it alone, and the shard loaded from the result still knows the group
    (so adoption never brings the upstream's older offsets back)."""
    from coordinator import records
    from coordinator.group.adopt import AdoptedOffset, adoption_records
    from storage.api import LogRecord
    from storage.format import encode_batch

    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    adopted = adoption_records("moved", "consumer", (AdoptedOffset("t", 0, 5, -1, ""),), source="upstream", now_ms=1)
    deleted = (records.new_offset_commit_tombstone("moved", "t", 0), records.new_group_metadata_tombstone("moved"))
    log = [LogRecord(records.serialize_key(r.key), records.serialize_value(r.value), r.headers)
           for r in (*adopted, *deleted)]
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, log, 1))
    compact(tmp_path / "data", tmp_path / "out", Options(now_ms=2 * DAY_MS, delete_retention_ms=DAY_MS))
    assert tombstones(tmp_path / "out") == 0

    async def load() -> GroupShard:
        store = FileLogStore(tmp_path / "out", num_partitions=1, fsync="never")
        await store.open()
        try:
            clock = ManualClock(2 * DAY_MS)
            shard = GroupShard(0, GroupConfig(), ManualTimer(clock.now_ms), clock.now_ms, lambda c: c)
            await load_partition(store, 0, shard, KafkaRecordSerde())
            return shard
        finally:
            await store.close()

    shard = asyncio.run(load())
    assert shard.knows("moved") and not shard.groups and not shard.offsets.committed


def test_verify_compares_classic_group_metadata_not_a_consumer_groups_records(tmp_path, capsys):
    """A KIP-848 group's records are not GroupMetadata: the state `--verify` compares
    leaves them out, so compaction dropping a member's record with its expired tombstone
    (the group's epoch record stays, the latest of its key) changes nothing there."""
    from coordinator import records
    from storage.api import LogRecord
    from storage.format import encode_batch

    member = records.ConsumerGroupMemberMetadataValue(None, None, "client", "/10.0.0.1", ("t",), None, 30_000, None)
    written = (records.new_consumer_group_epoch_record("kip848", 1),
               records.new_consumer_group_member_subscription_record("kip848", "m", member),
               records.new_consumer_group_member_subscription_tombstone("kip848", "m"))
    log = [LogRecord(records.serialize_key(r.key), records.serialize_value(r.value), r.headers) for r in written]
    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, log, 1))
    code = main(["compact", str(tmp_path / "data"), "--out", str(tmp_path / "out"), "--engine", "python", "--verify",
                 "--now-ms", str(2 * DAY_MS), "--delete-retention-ms", str(DAY_MS)])
    assert code == 0, capsys.readouterr().err
    assert "verify: same state (0 offsets, 0 groups)" in capsys.readouterr().out
    assert tombstones(tmp_path / "out") == 0


def test_a_partition_result_with_its_compaction_survives_pickling():
    """Spark returns each task's result pickled."""
    stats = CompactionStats(records_before=10, records_after=4, batches_before=3, batches_after=2, bytes_before=900,
                            bytes_after=400, segments_written=2)
    result = PartitionResult(7, records=10, compaction=stats)
    assert pickle.loads(pickle.dumps(result)) == result
    assert copy.copy(stats) == stats
