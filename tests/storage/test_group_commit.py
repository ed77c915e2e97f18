"""Group commit and the fsync policies, proven by counting what reaches the disk."""

from __future__ import annotations

import asyncio

import pytest

from storage.api import LogRecord
from storage.file_store import FileLogStore
from storage.fsync_policy import FsyncMode, FsyncPolicy
from tests.storage.seams import CountingIO


def one(i: int) -> list[LogRecord]:
    return [LogRecord(b"k%d" % i, b"v%d" % i)]


@pytest.mark.parametrize("text,expected", [
    ("always", FsyncPolicy(FsyncMode.ALWAYS)),
    ("never", FsyncPolicy(FsyncMode.NEVER)),
    ("interval:250", FsyncPolicy(FsyncMode.INTERVAL, 250)),
    (" interval:5 ", FsyncPolicy(FsyncMode.INTERVAL, 5)),
])
def test_policies_parse(text, expected):
    assert FsyncPolicy.parse(text) == expected
    assert FsyncPolicy.parse(str(expected)) == expected


@pytest.mark.parametrize("text", ["", "sometimes", "ALWAYS", "interval", "interval:", "interval:0",
                                  "interval:-5", "interval:1.5", "interval:abc", "always:1", "never:0"])
def test_a_bad_policy_is_a_value_error_naming_it(text):
    with pytest.raises(ValueError, match=f"bad fsync policy {text!r}"):
        FsyncPolicy.parse(text)
    with pytest.raises(ValueError, match="bad fsync policy"):
        FileLogStore("/nonexistent", fsync=text)


async def open_counting(tmp_path, fsync):
    io = CountingIO()
    store = FileLogStore(tmp_path, num_partitions=2, fsync=fsync, io=io)
    await store.open()
    io.events.clear()
    io.counts.clear()
    return store, io


async def test_always_fsyncs_before_any_batch_is_released(tmp_path):
    store, io = await open_counting(tmp_path, "always")
    try:
        seen_at_release = []
        for i in range(5):
            append = store.append(0, one(i), i)
            append.durable.add_done_callback(lambda f: seen_at_release.append(list(io.events)))
            await append.durable
        for i, events in enumerate(seen_at_release):
            assert events == ["write", "fsync"] * (i + 1)
    finally:
        await store.close()


async def test_one_write_and_one_fsync_release_every_batch_queued_together(tmp_path):
    store, io = await open_counting(tmp_path, "always")
    try:
        appends = [store.append(0, one(i), i) for i in range(50)]
        assert await asyncio.gather(*(a.durable for a in appends)) == list(range(50))
        assert io.counts == {"write": 1, "fsync": 1}
        assert [b.base_offset for b in store.read(0)] == list(range(50))
    finally:
        await store.close()


async def test_batches_queued_during_a_write_go_together_in_the_next_one(tmp_path):
    store, io = await open_counting(tmp_path, "always")
    try:
        first = store.append(0, one(0), 0)
        await asyncio.sleep(0)              # the writer takes the first batch into its thread
        rest = [store.append(0, one(i), i) for i in range(1, 30)]
        await asyncio.gather(first.durable, *(a.durable for a in rest))
        assert io.counts == {"write": 2, "fsync": 2}
    finally:
        await store.close()


async def test_never_releases_batches_without_fsync(tmp_path):
    store, io = await open_counting(tmp_path, "never")
    try:
        for i in range(5):
            await store.append(0, one(i), i).durable
        assert io.counts == {"write": 5}
        assert [b.base_offset for b in store.read(0)] == list(range(5))
    finally:
        await store.close()


async def test_interval_releases_on_write_and_fsyncs_within_the_interval(tmp_path):
    store, io = await open_counting(tmp_path, "interval:40")
    try:
        await store.append(0, one(0), 0).durable
        assert io.counts["fsync"] == 0              # released once written
        for _ in range(100):                        # bounded: ~1 s at most
            if io.counts["fsync"]:
                break
            await asyncio.sleep(0.01)
        assert io.counts == {"write": 1, "fsync": 1}
        # Past the interval, the next write carries its own fsync.
        await asyncio.sleep(0.05)
        await store.append(0, one(1), 1).durable
        assert io.events[-2:] == ["write", "fsync"]
    finally:
        await store.close()


async def test_close_fsyncs_what_was_only_written(tmp_path):
    store, io = await open_counting(tmp_path, "never")
    await store.append(1, one(0), 0).durable
    await store.close()
    assert io.counts == {"write": 1, "fsync": 1}


async def test_never_writes_from_the_loop_so_the_batch_is_durable_when_append_returns(tmp_path):
    store, io = await open_counting(tmp_path, "never")
    try:
        for i in range(3):
            append = store.append(0, one(i), i)
            assert append.durable.done() and append.durable.result() == i
        assert io.counts == {"write": 3}
        assert [b.base_offset for b in store.read(0)] == [0, 1, 2]
    finally:
        await store.close()


async def test_always_never_writes_from_the_loop(tmp_path):
    store, io = await open_counting(tmp_path, "always")
    try:
        append = store.append(0, one(0), 0)
        assert not append.durable.done() and io.counts == {}
        assert await append.durable == 0
        assert io.events == ["write", "fsync"]
    finally:
        await store.close()


async def test_a_write_that_rolls_goes_through_the_thread_even_under_never(tmp_path):
    io = CountingIO()
    store = FileLogStore(tmp_path, num_partitions=1, fsync="never", segment_bytes=200, io=io)
    await store.open()
    try:
        first = store.append(0, [LogRecord(b"k", b"x" * 150)], 0)
        assert first.durable.done()
        io.events.clear()
        second = store.append(0, [LogRecord(b"k", b"y" * 150)], 1)
        assert not second.durable.done()        # the roll fsyncs: not on the loop
        assert await second.durable == 1
        assert io.events[0] == "fsync"          # the closed segment, before the new one
        assert len(list(tmp_path.glob("*/*.log"))) == 2
    finally:
        await store.close()


async def test_interval_writes_inline_until_an_fsync_is_due_then_through_the_thread(tmp_path):
    store, io = await open_counting(tmp_path, "interval:60000")
    try:
        assert store.append(0, one(0), 0).durable.done()
        store._writers[0]._last_fsync -= 61     # the interval has passed
        late = store.append(0, one(1), 1)
        assert not late.durable.done()
        assert await late.durable == 1
        assert io.events == ["write", "write", "fsync"]
    finally:
        await store.close()
