"""Group commit and the fsync policies, proven by counting what reaches the disk."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from storage import group_commit
from storage.api import LogRecord
from storage.file_store import FileLogStore
from storage.format import encode_batch
from storage.fsync_policy import FsyncMode, FsyncPolicy
from storage.group_commit import LOOP_FSYNC_MAX_BYTES
from tests.support.storage_seams import CountingIO
from tests.support.waiting import wait_until


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
        # The first write grew the file (fsync), the second landed in its preallocated tail.
        assert io.counts == {"write": 2, "fsync": 2, "fdatasync": 1}
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
    # 300 ms: a loaded machine may pause this test for tens of ms between open and the
    # first append, and a first append past the interval would carry its own fsync.
    store, io = await open_counting(tmp_path, "interval:300")
    try:
        await store.append(0, one(0), 0).durable
        assert io.counts["fsync"] == 0              # released once written
        await wait_until(lambda: io.counts["fsync"], what="the interval's fsync")
        assert io.counts == {"write": 1, "fsync": 1}
        # Past the interval, the next write carries its own fsync.
        await asyncio.sleep(0.32)
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


async def test_always_never_writes_inside_append_so_requests_read_together_share_an_fsync(tmp_path):
    store, io = await open_counting(tmp_path, "always")
    try:
        append = store.append(0, one(0), 0)
        assert not append.durable.done() and io.counts == {}
        assert await append.durable == 0
        assert io.events == ["write", "fsync"]
    finally:
        await store.close()


class ThreadNotingIO(CountingIO):
    """Notes which thread each fsync ran on, and fsyncs nothing: these tests are about
    where an fsync runs, and a real one's time (this disk's) would decide it. `fsync_s`
    makes every fsync take that long, `hold` (a threading.Event) makes those in writer
    threads wait for it."""

    def __init__(self):
        super().__init__()
        self.fsync_threads: list[str] = []
        self.fsync_s = 0.0
        self.hold: threading.Event | None = None

    def fsync(self, fd):
        on_loop = threading.current_thread() is threading.main_thread()
        self.fsync_threads.append("loop" if on_loop else "thread")
        if self.hold is not None and not on_loop:
            assert self.hold.wait(10)
        time.sleep(self.fsync_s)
        self._note("fsync")

    def fdatasync(self, fd):
        self.counts["fdatasync"] += 1
        self.fsync(fd)


# Far above a no-op fsync's time even on a loaded machine.
SLOW_S = 0.05


async def open_noting(tmp_path, monkeypatch, num_partitions=2):
    monkeypatch.setattr(group_commit, "LOOP_FSYNC_MAX_S", SLOW_S)
    io = ThreadNotingIO()
    store = FileLogStore(tmp_path, num_partitions=num_partitions, fsync="always", io=io)
    await store.open()
    io.events.clear()
    io.counts.clear()
    io.fsync_threads.clear()
    return store, io


async def test_a_lone_small_commit_fsyncs_on_the_loop_and_is_released_there(tmp_path, monkeypatch):
    store, io = await open_noting(tmp_path, monkeypatch)
    try:
        await store.append(0, one(0), 0).durable      # the first write preallocates (a thread's)
        io.events.clear()
        io.fsync_threads.clear()
        for i in range(1, 4):
            append = store.append(0, one(i), i)
            assert not append.durable.done()
            await asyncio.sleep(0)          # the end of the iteration: written, fsynced, released
            assert append.durable.done() and append.durable.result() == i
        assert io.fsync_threads == ["loop"] * 3
        assert io.events == ["write", "fsync"] * 3
    finally:
        await store.close()


async def test_a_commit_that_extends_the_preallocated_tail_fsyncs_in_the_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(group_commit, "LOOP_FSYNC_MAX_S", SLOW_S)
    io = ThreadNotingIO()
    store = FileLogStore(tmp_path, num_partitions=1, io=io, preallocate_bytes=2 * len(encode_batch(0, one(0), 0)))
    await store.open()
    io.fsync_threads.clear()
    try:
        for i in range(6):
            await store.append(0, one(i), i).durable
        # Every third write runs past the two batches of zeros ahead of the log.
        assert io.fsync_threads == ["thread", "loop", "loop", "thread", "loop", "loop"]
        assert io.counts["fdatasync"] == 4
    finally:
        await store.close()


async def test_two_partitions_written_in_one_iteration_fsync_in_their_threads(tmp_path, monkeypatch):
    store, io = await open_noting(tmp_path, monkeypatch)
    try:
        appends = [store.append(p, one(0), 0) for p in (0, 1)]
        assert await asyncio.gather(*(a.durable for a in appends)) == [0, 0]
        assert io.fsync_threads == ["thread", "thread"]
    finally:
        await store.close()


async def test_while_a_thread_fsyncs_another_partition_fsyncs_in_its_thread_too(tmp_path, monkeypatch):
    store, io = await open_noting(tmp_path, monkeypatch)
    io.hold = threading.Event()
    try:
        big = store.append(1, [LogRecord(b"k", b"x" * (LOOP_FSYNC_MAX_BYTES + 1))], 0)   # a thread's
        await asyncio.sleep(0)
        small = store.append(0, one(0), 0)
        for _ in range(3):
            await asyncio.sleep(0)
        assert not small.durable.done()             # not fsynced on the loop beside the busy thread
        io.hold.set()
        assert await asyncio.gather(big.durable, small.durable) == [0, 0]
        assert io.fsync_threads == ["thread", "thread"]
    finally:
        await store.close()


async def test_after_a_slow_fsync_the_next_goes_to_the_thread_until_one_is_fast(tmp_path, monkeypatch):
    store, io = await open_noting(tmp_path, monkeypatch)
    try:
        await store.append(0, one(0), 0).durable        # preallocates (a thread's), fast
        io.fsync_threads.clear()
        io.fsync_s = 1.2 * SLOW_S
        await store.append(0, one(1), 1).durable        # on the loop: nothing said it was slow
        await store.append(0, one(2), 2).durable        # the last one was slow: a thread
        io.fsync_s = 0.0
        await store.append(0, one(3), 3).durable        # still judged by the slow one: a thread
        await store.append(0, one(4), 4).durable        # the last was fast: the loop again
        assert io.fsync_threads == ["loop", "thread", "thread", "loop"]
    finally:
        await store.close()


async def test_a_large_group_fsyncs_in_the_thread(tmp_path, monkeypatch):
    store, io = await open_noting(tmp_path, monkeypatch)
    try:
        big = [LogRecord(b"k", b"x" * (LOOP_FSYNC_MAX_BYTES + 1))]
        assert await store.append(0, big, 0).durable == 0
        assert io.fsync_threads == ["thread"]
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
