"""The online cleaner: same state before and after, never the active segment, tombstone
retention by the injected clock, safe against concurrent appends and crashes."""

from __future__ import annotations

import asyncio
import os

import pytest

from storage.api import LogRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch
from storage.manifest import MANIFEST_NAME
from storage.segment import segment_name
from tests.support.storage_seams import FailingIO

DAY_MS = 86_400_000
BATCH_BYTES = len(encode_batch(0, [LogRecord(b"k0", b"v000")], 0))


class Clock:
    def __init__(self, now_ms: int = 0):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def replay(store, partition=0) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for batch in store.read(partition):
        for r in batch.records:
            if r.value is None:
                state.pop(r.key, None)
            else:
                state[r.key] = r.value
    return state


def segments(data_dir) -> list[str]:
    return sorted(n for n in os.listdir(partition_dir(data_dir, 0)) if n.endswith(".log"))


async def open_store(data_dir, clock=None, io=None) -> FileLogStore:
    store = FileLogStore(data_dir, num_partitions=1, segment_bytes=3 * BATCH_BYTES,
                         delete_retention_ms=DAY_MS, clock=clock or Clock(), io=io)
    await store.open()
    return store


async def write(store, ops: list[tuple[bytes, bytes | None]], timestamp_ms: int = 0) -> None:
    for key, value in ops:
        await store.append(0, [LogRecord(key, value)], timestamp_ms).durable


# Four keys over segments of three records: some closed segments empty out, some keep
# a record and are rewritten.
OPS = [(b"k%d" % (i % 4), b"v%03d" % i) for i in range(12)]


async def test_cleaning_keeps_the_state_and_shrinks_closed_segments(tmp_path):
    store = await open_store(tmp_path)
    try:
        await write(store, OPS)
        before = replay(store)
        active = partition_dir(tmp_path, 0) / segments(tmp_path)[-1]
        active_bytes = active.read_bytes()
        report = await store.clean(0)
        assert report.records_after < report.records_before
        assert report.segments_written == 1 and report.segments_removed == 1
        assert replay(store) == before
        assert active.read_bytes() == active_bytes              # never the active segment
        offsets = [r.offset for b in store.read(0) for r in b.records]
        assert offsets == sorted(offsets)
        assert store.end_offset(0) == len(OPS)
        assert await store.append(0, [LogRecord(b"k0", b"new")], 0).durable == len(OPS)
    finally:
        await store.close()
    reopened = await open_store(tmp_path)
    try:
        assert replay(reopened) == {**before, b"k0": b"new"}
        assert not [n for n in os.listdir(partition_dir(tmp_path, 0)) if n.endswith(".cleaned")]
    finally:
        await reopened.close()


async def test_the_active_segment_keeps_its_duplicates(tmp_path):
    store = await open_store(tmp_path)
    try:
        await write(store, [(b"a", b"v1"), (b"a", b"v2")])       # both in the active segment
        report = await store.clean(0)
        assert report.records_before == 0 and report.segments_written == 0
        assert [r.value for b in store.read(0) for r in b.records] == [b"v1", b"v2"]
    finally:
        await store.close()


async def test_tombstones_outlive_the_retention_then_go_with_their_key(tmp_path):
    clock = Clock()
    store = await open_store(tmp_path, clock)
    try:
        await write(store, [(b"gone", b"v1"), (b"gone", b"v2")], timestamp_ms=0)
        await write(store, [(b"gone", None)], timestamp_ms=1_000)
        await write(store, [(b"x", b"1"), (b"y", b"1"), (b"z", b"1")], timestamp_ms=2_000)
        assert len(segments(tmp_path)) == 2                     # the tombstone is in a closed segment

        clock.now_ms = 1_000 + DAY_MS - 1
        await store.clean(0)
        assert [(r.key, r.value) for b in store.read(0) for r in b.records][:1] == [(b"gone", None)]

        clock.now_ms = 1_000 + DAY_MS
        report = await store.clean(0)
        assert report.segments_removed == 1                     # nothing left in it
        assert segments(tmp_path) == [segment_name(3)]
        assert b"gone" not in [r.key for b in store.read(0) for r in b.records]
        assert replay(store) == {b"x": b"1", b"y": b"1", b"z": b"1"}
    finally:
        await store.close()


async def test_appends_during_a_clean_are_neither_lost_nor_cleaned(tmp_path):
    store = await open_store(tmp_path)
    try:
        await write(store, OPS)
        cleaning = asyncio.create_task(store.clean(0))
        more = [store.append(0, [LogRecord(b"k%d" % (i % 4), b"late%d" % i)], 0) for i in range(20)]
        await asyncio.gather(cleaning, *(a.durable for a in more))
        expected = dict(OPS) | {b"k%d" % (i % 4): b"late%d" % i for i in range(20)}
        assert replay(store) == expected
        assert store.end_offset(0) == len(OPS) + 20
    finally:
        await store.close()
    reopened = await open_store(tmp_path)
    try:
        assert replay(reopened) == expected
    finally:
        await reopened.close()


@pytest.mark.parametrize("op", ["write_file", "replace", "fsync_dir"])
async def test_a_crash_at_any_step_of_a_swap_loads_the_same_state(tmp_path, op):
    io = FailingIO()
    store = await open_store(tmp_path, io=io)
    await write(store, OPS)
    before = replay(store)
    io.fail_next(op)
    with pytest.raises(OSError):
        await store.clean(0)
    # The process dies here: no cleanup, the next start opens what is on disk.
    await store.close()
    reopened = await open_store(tmp_path)
    try:
        assert reopened.partition_error(0) is None
        assert replay(reopened) == before
        assert not [n for n in os.listdir(partition_dir(tmp_path, 0)) if not n.endswith(".log") and n != MANIFEST_NAME]
        await reopened.clean(0)
        assert replay(reopened) == before
    finally:
        await reopened.close()
