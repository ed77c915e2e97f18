"""Crash and corruption: torn tails are cut and saved, damage in the middle is refused
for its partition only (ZODB `Corruption.py`, DESIGN §4)."""

from __future__ import annotations

import os
import shutil

import pytest

from storage.api import CorruptLogError, LogRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import BatchReader, encode_batch
from storage.segment import segment_name

BATCHES = 4


async def write_log(data_dir, partitions=2, batches=BATCHES, segment_bytes=100 * 2**20):
    """A closed store whose partition 0 holds `batches` one-record batches (offsets
    0..batches-1) and partition 1 one batch."""
    store = FileLogStore(data_dir, num_partitions=partitions, segment_bytes=segment_bytes)
    await store.open()
    for i in range(batches):
        await store.append(0, [LogRecord(b"k%d" % i, b"v%d" % i, (("m", b"x"),))], 1_000 + i).durable
    await store.append(1, [LogRecord(b"other", b"1")], 5).durable
    await store.close()


def segment_path(data_dir, partition=0, base_offset=0):
    return partition_dir(data_dir, partition) / segment_name(base_offset)


def batch_starts(path):
    data = path.read_bytes()
    return [position for position, _ in BatchReader(data).headers()]


async def reopen(data_dir, partitions=2):
    store = FileLogStore(data_dir, num_partitions=partitions)
    await store.open()
    return store


async def test_cut_at_every_byte_of_the_last_batch_leaves_whole_batches_and_saves_the_cut(tmp_path):
    pristine = tmp_path / "pristine"
    await write_log(pristine)
    original = segment_path(pristine).read_bytes()
    last_start = batch_starts(segment_path(pristine))[-1]
    for cut in range(last_start, len(original)):
        data_dir = tmp_path / f"cut-{cut}"
        shutil.copytree(pristine, data_dir)
        path = segment_path(data_dir)
        with open(path, "r+b") as f:
            f.truncate(cut)
        store = await reopen(data_dir)
        try:
            assert store.partition_error(0) is None
            assert [b.base_offset for b in store.read(0)] == list(range(BATCHES - 1))
            assert store.end_offset(0) == BATCHES - 1
            torn = sorted(p.name for p in path.parent.iterdir() if ".torn-" in p.name)
            if not original[last_start:cut].strip(b"\x00"):
                # A clean cut at a batch boundary is no tear; nor are the zeros of a small
                # base offset's first bytes: a zero tail, the log's end (nothing to save).
                assert torn == []
                assert path.read_bytes() == original[:cut]
            else:
                assert path.read_bytes() == original[:last_start]
                assert torn == [path.name + ".torn-1"]
                # Saved up to its last non-zero byte: zeros after it are no evidence.
                assert (path.parent / torn[0]).read_bytes() == original[last_start:cut].rstrip(b"\x00")
            # The cut log takes new batches where the lost one was.
            assert await store.append(0, [LogRecord(b"n", b"n")], 9).durable == BATCHES - 1
        finally:
            await store.close()
        shutil.rmtree(data_dir)


async def test_a_second_tear_never_overwrites_the_first_evidence(tmp_path):
    await write_log(tmp_path)
    path = segment_path(tmp_path)
    for expected in (1, 2):
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.truncate(size - 3)
        store = await reopen(tmp_path)
        await store.close()
        assert (path.parent / f"{path.name}.torn-{expected}").exists()
    store = await reopen(tmp_path)
    try:
        assert [b.base_offset for b in store.read(0)] == [0, 1]
    finally:
        await store.close()


@pytest.mark.parametrize("zeros", [5, 100, 2**20])
async def test_a_zero_filled_tail_is_the_end_of_the_log(tmp_path, zeros):
    # A preallocated tail, or what some filesystems show after a crash: the file grew but
    # the data never landed. Either way nothing was written there: no tear, no evidence.
    await write_log(tmp_path)
    path = segment_path(tmp_path)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(bytes(zeros))
    store = await reopen(tmp_path)
    try:
        assert store.partition_error(0) is None
        assert [b.base_offset for b in store.read(0)] == list(range(BATCHES))
        assert not [p for p in path.parent.iterdir() if ".torn-" in p.name]
        # The next batch goes where the log ends, over the zeros.
        assert await store.append(0, [LogRecord(b"n", b"n")], 9).durable == BATCHES
        assert [b.base_offset for b in store.read(0)] == list(range(BATCHES + 1))
    finally:
        await store.close()
    assert batch_starts(path)[-1] == size and path.stat().st_size > size


@pytest.mark.parametrize("where", ["length", "magic", "crc", "attributes", "record"])
async def test_damage_before_a_sound_batch_refuses_that_partition_only(tmp_path, where):
    await write_log(tmp_path)
    path = segment_path(tmp_path)
    starts = batch_starts(path)
    damaged = starts[1]
    flip_at = damaged + {"length": 10, "magic": 16, "crc": 18, "attributes": 22, "record": 70}[where]
    data = bytearray(path.read_bytes())
    data[flip_at] ^= 0x41
    path.write_bytes(bytes(data))

    store = await reopen(tmp_path)
    try:
        error = store.partition_error(0)
        assert isinstance(error, CorruptLogError)
        assert error.path == str(path)
        assert error.position == damaged
        assert str(path) in str(error) and f"byte {damaged}" in str(error)
        assert f"sound batch follows at byte {starts[2]}" in str(error)
        with pytest.raises(CorruptLogError):
            list(store.read(0))
        with pytest.raises(CorruptLogError):
            store.append(0, [LogRecord(b"k", b"v")], 1)
        # Nothing was cut or saved: the evidence stays as it was.
        assert path.read_bytes() == bytes(data)
        assert not [p for p in path.parent.iterdir() if ".torn-" in p.name]
        # The other partition reads and appends.
        assert [r.key for b in store.read(1) for r in b.records] == [b"other"]
        assert await store.append(1, [LogRecord(b"more", b"2")], 6).durable == 1
        # Recover cannot make it sound: the error stays until an operator acts.
        with pytest.raises(CorruptLogError):
            await store.recover(0)
    finally:
        await store.close()


async def test_a_whole_last_batch_going_back_in_offsets_is_no_torn_tail(tmp_path):
    await write_log(tmp_path)
    path = segment_path(tmp_path)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(encode_batch(1, [LogRecord(b"k", b"again")], 7))
    store = await reopen(tmp_path)
    try:
        error = store.partition_error(0)
        assert isinstance(error, CorruptLogError)
        assert (error.path, error.position) == (str(path), size)
        assert "offsets not increasing" in error.reason
        assert not [p for p in path.parent.iterdir() if ".torn-" in p.name]
    finally:
        await store.close()


async def test_damage_in_a_closed_segment_is_corruption_even_at_its_end(tmp_path):
    await write_log(tmp_path, batches=6, segment_bytes=200)
    directory = partition_dir(tmp_path, 0)
    segments = sorted(p for p in directory.iterdir() if p.suffix == ".log")
    assert len(segments) > 2
    closed = segments[0]
    with open(closed, "r+b") as f:
        f.truncate(closed.stat().st_size - 1)
    store = await reopen(tmp_path)
    try:
        error = store.partition_error(0)
        assert isinstance(error, CorruptLogError)
        assert error.path == str(closed)
        assert "closed segment" in error.reason
        assert store.partition_error(1) is None
    finally:
        await store.close()


async def test_leftover_cleaned_file_is_removed_on_open(tmp_path):
    await write_log(tmp_path)
    path = segment_path(tmp_path)
    leftover = path.with_name(path.name + ".cleaned")
    leftover.write_bytes(b"half a compaction")
    store = await reopen(tmp_path)
    try:
        assert not leftover.exists()
        assert [b.base_offset for b in store.read(0)] == list(range(BATCHES))
    finally:
        await store.close()


async def test_leftover_swap_file_replaces_the_segments_it_covers(tmp_path):
    await write_log(tmp_path, batches=6, segment_bytes=200)
    directory = partition_dir(tmp_path, 0)
    segments = sorted(p for p in directory.iterdir() if p.suffix == ".log")
    first, second = segments[0], segments[1]
    # A Kafka cleaner merged the first two segments into one `.swap` and stopped there.
    merged = first.read_bytes() + second.read_bytes()
    swap = first.with_name(first.name + ".swap")
    swap.write_bytes(merged)
    os.truncate(first, 0)
    store = await reopen(tmp_path)
    try:
        assert store.partition_error(0) is None
        assert not swap.exists() and not second.exists()
        assert first.read_bytes() == merged
        assert [b.base_offset for b in store.read(0)] == list(range(6))
    finally:
        await store.close()
