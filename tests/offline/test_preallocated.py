"""The offline readers on a live data dir (or a kill -9 copy) whose active segments end in
their preallocated zero tail (`fsync always`): `kgc inspect`, the record scanner, the
columnar scanner, and the audit read the log and stop at the zeros, with no finding; a
write landing in the tail is a write in progress; zeros in a closed segment are damage."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator import records
from coordinator.offline.columns import scan_columns
from coordinator.offline.findings import FindingType
from coordinator.offline.inspect import inspect_data_dir
from coordinator.offline.job import Options
from coordinator.offline.runner import audit
from coordinator.offline.scan import PartitionScan
from coordinator.partitioning import partition_for
from storage.api import LogRecord
from storage.file_store import PREALLOCATE_BYTES, FileLogStore, partition_dir
from storage.format import encode_batch
from storage.segment import segment_name
from tests.support.log_records import log_record

T0 = 1_700_000_000_000
GROUP = "g-live"
COMMITS = 5


def commit(offset: int) -> LogRecord:
    return log_record(records.new_offset_commit_record(
        GROUP, "t", 0, records.OffsetCommitValue(offset, -1, "", T0), member_id="m1", generation=1,
        client_id="c", client_host="/127.0.0.1"))


@pytest.fixture
async def live(tmp_path):
    """A running store (`fsync always`) with COMMITS acknowledged commits on GROUP's partition."""
    store = FileLogStore(tmp_path, num_partitions=50)
    await store.open()
    try:
        for i in range(COMMITS):
            await store.append(partition_for(GROUP), [commit(100 + i)], T0 + i).durable
        yield tmp_path
    finally:
        await store.close()


def active(data_dir):
    return partition_dir(data_dir, partition_for(GROUP)) / segment_name(0)


def scans(data_dir):
    directory = partition_dir(data_dir, partition_for(GROUP))
    record_scan = PartitionScan(partition_for(GROUP), directory)
    offsets = [r.offset for s in record_scan for r in s.batch.records]
    column_scan = scan_columns(partition_for(GROUP), directory)
    return offsets, record_scan, column_scan


async def test_inspect_reads_a_live_dir_to_the_end_of_its_log(live):
    assert active(live).stat().st_size > PREALLOCATE_BYTES
    inspection = inspect_data_dir(live, group=GROUP)
    assert not inspection.corrupt
    (part,) = inspection.partitions
    assert part.segments[-1].damage is None and len(part.segments[-1].batches) == COMMITS
    assert inspection.groups[GROUP].offsets[("t", 0)].offset == 100 + COMMITS - 1


async def test_both_scanners_stop_at_the_zero_tail_without_a_finding(live):
    offsets, record_scan, column_scan = scans(live)
    assert offsets == list(range(COMMITS))
    for scan in (record_scan, column_scan.scan):
        assert (scan.problems, scan.evidence, scan.next_offset, scan.tail_bytes) == ([], [], COMMITS, 0)
    assert [int(o) for o in column_scan.offset] == offsets


async def test_a_write_landing_in_the_tail_is_in_progress_not_damage(live):
    batch = encode_batch(COMMITS, [commit(200)], T0)
    with open(active(live), "r+b") as f:
        f.seek(sum(len(encode_batch(i, [commit(100 + i)], T0 + i)) for i in range(COMMITS)))
        f.write(batch[:60])
    offsets, record_scan, column_scan = scans(live)
    assert offsets == list(range(COMMITS))
    for scan in (record_scan, column_scan.scan):
        assert (scan.problems, scan.tail_bytes) == ([], len(batch[:60].rstrip(b"\x00")))
    damage = inspect_data_dir(live, group=GROUP).partitions[0].segments[-1].damage
    assert damage.torn_tail and "bad CRC" in damage.reason


async def test_the_audit_of_a_live_dir_finds_nothing(live, tmp_path_factory):
    for scanner in ("records", "columns"):
        run = audit(live, tmp_path_factory.mktemp(f"report-{scanner}"), Options(now_ms=T0 + 60_000, scanner=scanner))
        # No integrity finding (those name a segment); the commits are read (and, with no
        # GroupMetadata written, found orphaned: the audit did see them).
        findings = [f for r in run.results for f in r.findings]
        assert [f for f in findings if f.segment is not None] == []
        assert {f.type for f in findings} == {FindingType.ORPHANED_OFFSET}
        assert run.summary["records"] == COMMITS


async def test_zeros_after_the_log_of_a_closed_segment_are_damage(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=50, segment_bytes=1024)
    await store.open()
    try:
        for i in range(40):
            await store.append(partition_for(GROUP), [commit(i)], T0 + i).durable
    finally:
        await store.close()
    closed = active(tmp_path)
    with open(closed, "ab") as f:
        f.write(bytes(64))
    _offsets, record_scan, column_scan = scans(tmp_path)
    for scan in (record_scan, column_scan.scan):
        assert [(f.type, f.segment) for f in scan.problems] == [(FindingType.CORRUPT_BATCH, closed.name)]
    assert inspect_data_dir(tmp_path, group=GROUP).corrupt
