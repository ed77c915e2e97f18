"""Data dir layout, segment roll and reads across segments."""

from __future__ import annotations

import asyncio

from storage.api import LogRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch
from storage.segment import parse_segment_name, segment_name


def one(i: int) -> list[LogRecord]:
    return [LogRecord(b"key-%03d" % i, b"value-%03d" % i)]


BATCH_BYTES = len(encode_batch(0, one(0), 0))


def segment_files(data_dir, partition=0):
    return sorted(p.name for p in partition_dir(data_dir, partition).iterdir() if p.suffix == ".log")


def test_segment_names_are_twenty_digit_base_offsets():
    assert segment_name(12345) == "00000000000000012345.log"
    assert parse_segment_name("00000000000000012345.log") == 12345
    assert parse_segment_name("00000000000000012345.log.torn-1") is None
    assert parse_segment_name("00000000000000012345.index") is None
    assert parse_segment_name("12345.log") is None


async def test_open_creates_one_directory_and_empty_segment_per_partition(tmp_path):
    store = FileLogStore(tmp_path)
    await store.open()
    await store.close()
    # And the lock file (storage/dir_lock.py), which stays, empty, after the store closes.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".lock", *(f"__consumer_offsets-{p}" for p in range(50))])
    assert (tmp_path / ".lock").stat().st_size == 0
    assert segment_files(tmp_path, 49) == ["00000000000000000000.log"]


async def test_segments_roll_at_segment_bytes_and_reads_span_them(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=3 * BATCH_BYTES)
    await store.open()
    try:
        for i in range(10):
            await store.append(0, one(i), i).durable
        assert segment_files(tmp_path) == [segment_name(b) for b in (0, 3, 6, 9)]
        for name in segment_files(tmp_path)[:-1]:
            assert (partition_dir(tmp_path, 0) / name).stat().st_size == 3 * BATCH_BYTES
        assert [b.base_offset for b in store.read(0)] == list(range(10))
        assert [b.base_offset for b in store.read(0, 4)] == list(range(4, 10))
        assert [b.base_offset for b in store.read(0, 9)] == [9]
    finally:
        await store.close()


async def test_a_group_commit_spanning_a_roll_puts_each_batch_in_the_right_segment(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=2 * BATCH_BYTES)
    await store.open()
    try:
        appends = [store.append(0, one(i), i) for i in range(5)]    # one write group
        await asyncio.gather(*(a.durable for a in appends))
        assert segment_files(tmp_path) == [segment_name(b) for b in (0, 2, 4)]
    finally:
        await store.close()
    reopened = FileLogStore(tmp_path, num_partitions=1, segment_bytes=2 * BATCH_BYTES)
    await reopened.open()
    try:
        assert [r.key for b in reopened.read(0) for r in b.records] == [one(i)[0].key for i in range(5)]
        assert reopened.end_offset(0) == 5
    finally:
        await reopened.close()


async def test_a_batch_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=BATCH_BYTES // 2)
    await store.open()
    try:
        for i in range(3):
            await store.append(0, one(i), i).durable
        assert segment_files(tmp_path) == [segment_name(b) for b in (0, 1, 2)]
    finally:
        await store.close()


async def test_a_read_sees_the_log_as_it_was_when_it_started(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=2 * BATCH_BYTES)
    await store.open()
    try:
        for i in range(3):
            await store.append(0, one(i), i).durable
        reading = store.read(0)
        for i in range(3, 6):
            await store.append(0, one(i), i).durable
        assert [b.base_offset for b in reading] == [0, 1, 2]
    finally:
        await store.close()


async def test_an_empty_segment_left_by_a_crash_right_after_a_roll_is_the_active_one(tmp_path):
    store = FileLogStore(tmp_path, num_partitions=1)
    await store.open()
    for i in range(2):
        await store.append(0, one(i), i).durable
    await store.close()
    (partition_dir(tmp_path, 0) / segment_name(2)).touch()
    reopened = FileLogStore(tmp_path, num_partitions=1)
    await reopened.open()
    try:
        assert reopened.end_offset(0) == 2
        assert await reopened.append(0, one(2), 2).durable == 2
        assert [b.base_offset for b in reopened.read(0)] == [0, 1, 2]
    finally:
        await reopened.close()
    # Closed: the preallocated tail is cut.
    assert (partition_dir(tmp_path, 0) / segment_name(2)).stat().st_size == BATCH_BYTES
