"""The preallocated active segment (`fsync always`): appends land in a zero tail and sync
with fdatasync; a copy of a live data dir (what kill -9 leaves) holds that tail, and
recovery reads it as the end of the log, a torn batch in it as a torn tail, and anything
else after the log as damage; a roll and a close cut the tail."""

from __future__ import annotations

import shutil

import pytest

from storage.api import CorruptLogError, LogRecord
from storage.file_store import PREALLOCATE_BYTES, FileLogStore, partition_dir
from storage.format import BatchReader, encode_batch
from storage.manifest import Manifest
from storage.segment import SegmentIO, segment_name
from tests.support.storage_seams import CountingIO


def one(i: int) -> list[LogRecord]:
    return [LogRecord(b"key-%03d" % i, b"value-%03d" % i)]


BATCH_BYTES = len(encode_batch(0, one(0), 0))


def segment(data_dir, base_offset=0):
    return partition_dir(data_dir, 0) / segment_name(base_offset)


async def live_copy(tmp_path, batches: int, **options):
    """A data dir copied while its store runs, after `batches` acknowledged appends:
    what a kill -9 leaves (the page cache holds every write)."""
    store = FileLogStore(tmp_path / "live", num_partitions=1, **options)
    await store.open()
    try:
        for i in range(batches):
            assert await store.append(0, one(i), i).durable == i
        shutil.copytree(tmp_path / "live", tmp_path / "copy")
    finally:
        await store.close()
    return tmp_path / "copy"


async def offsets_after_open(data_dir):
    store = FileLogStore(data_dir, num_partitions=1)
    await store.open()
    try:
        error = store.partition_error(0)
        if error is not None:
            raise error
        return [b.base_offset for b in store.read(0)]
    finally:
        await store.close()


def torn_files(data_dir):
    return sorted(p.name for p in partition_dir(data_dir, 0).iterdir() if ".torn-" in p.name)


async def test_appends_land_in_the_preallocated_tail_and_sync_with_fdatasync(tmp_path):
    io = CountingIO()
    store = FileLogStore(tmp_path, num_partitions=1, io=io)
    await store.open()
    io.counts.clear()
    try:
        for i in range(5):
            await store.append(0, one(i), i).durable
        assert segment(tmp_path).stat().st_size == BATCH_BYTES + PREALLOCATE_BYTES
        # The first append grew the file (an fsync); the other four changed no size.
        assert (io.counts["fsync"], io.counts["fdatasync"]) == (5, 4)
    finally:
        await store.close()
    assert segment(tmp_path).stat().st_size == 5 * BATCH_BYTES


@pytest.mark.parametrize("fsync", ["never", "interval:1000"])
async def test_without_fsync_always_segments_grow_as_written(tmp_path, fsync):
    store = FileLogStore(tmp_path, num_partitions=1, fsync=fsync)
    await store.open()
    try:
        for i in range(3):
            await store.append(0, one(i), i).durable
        assert segment(tmp_path).stat().st_size == 3 * BATCH_BYTES
    finally:
        await store.close()


async def test_a_live_copy_loads_exactly_the_acknowledged_batches(tmp_path):
    copy = await live_copy(tmp_path, 7)
    assert segment(copy).stat().st_size == BATCH_BYTES + PREALLOCATE_BYTES
    assert await offsets_after_open(copy) == list(range(7))
    assert torn_files(copy) == []


async def test_a_live_copy_takes_new_appends_after_its_log(tmp_path):
    copy = await live_copy(tmp_path, 3)
    store = FileLogStore(copy, num_partitions=1)
    await store.open()
    try:
        assert await store.append(0, one(3), 3).durable == 3
    finally:
        await store.close()
    assert await offsets_after_open(copy) == [0, 1, 2, 3]
    assert segment(copy).stat().st_size == 4 * BATCH_BYTES


@pytest.mark.parametrize("landed", [20, 50])
async def test_a_torn_batch_in_the_preallocated_tail_is_cut_and_saved(tmp_path, landed):
    copy = await live_copy(tmp_path, 3)
    torn = encode_batch(3, one(3), 3)[:landed]        # the part of the write that landed
    with open(segment(copy), "r+b") as f:
        f.seek(3 * BATCH_BYTES)
        f.write(torn)
    assert await offsets_after_open(copy) == [0, 1, 2]
    assert torn_files(copy) == [segment_name(0) + ".torn-1"]
    assert (partition_dir(copy, 0) / torn_files(copy)[0]).read_bytes() == torn.rstrip(b"\x00")
    assert segment(copy).stat().st_size == 3 * BATCH_BYTES


async def test_garbage_after_the_log_in_the_preallocated_tail_is_damage(tmp_path):
    copy = await live_copy(tmp_path, 3)
    with open(segment(copy), "r+b") as f:
        f.seek(3 * BATCH_BYTES)
        f.write(b"not a batch, not zeros" * 4)
    with pytest.raises(CorruptLogError, match="bad magic") as refused:
        await offsets_after_open(copy)
    assert refused.value.position == 3 * BATCH_BYTES
    assert torn_files(copy) == []


async def test_a_sound_batch_after_a_torn_one_in_the_tail_is_damage(tmp_path):
    copy = await live_copy(tmp_path, 3)
    with open(segment(copy), "r+b") as f:
        f.seek(3 * BATCH_BYTES)
        f.write(encode_batch(3, one(3), 3)[:30])
        f.seek(5 * BATCH_BYTES)
        f.write(encode_batch(4, one(4), 4))
    with pytest.raises(CorruptLogError, match=f"sound batch follows at byte {5 * BATCH_BYTES}"):
        await offsets_after_open(copy)


async def test_a_roll_cuts_the_tail_before_the_manifest_records_the_segment(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=3 * BATCH_BYTES + 10,
                           preallocate_bytes=4096)
    await store.open()
    try:
        for i in range(4):
            await store.append(0, one(i), i).durable
        closed, active = segment(tmp_path, 0), segment(tmp_path, 3)
        assert closed.stat().st_size == 3 * BATCH_BYTES
        state = Manifest(partition_dir(tmp_path, 0), SegmentIO()).load().state(0)
        assert (state.size, state.last_offset) == (3 * BATCH_BYTES, 2)
        # The active one is preallocated up to the segment size, not past it.
        assert active.stat().st_size == 3 * BATCH_BYTES + 10
        shutil.copytree(tmp_path, tmp_path.parent / "copy")
    finally:
        await store.close()
    assert await offsets_after_open(tmp_path.parent / "copy") == [0, 1, 2, 3]


async def test_a_zero_tail_in_a_closed_segment_is_damage(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=2 * BATCH_BYTES)
    await store.open()
    try:
        for i in range(3):
            await store.append(0, one(i), i).durable
    finally:
        await store.close()
    with open(segment(tmp_path, 0), "ab") as f:
        f.write(bytes(100))
    with pytest.raises(CorruptLogError, match="closed segment: zero fill"):
        await offsets_after_open(tmp_path)


def test_the_format_reads_a_live_tail_as_the_end():
    log = b"".join(encode_batch(i, one(i), i) for i in range(3))
    reader = BatchReader(log + bytes(PREALLOCATE_BYTES)).scan()
    assert (reader.end, reader.next_offset, reader.stop.reason.value) == (len(log), 3, "zero fill")
