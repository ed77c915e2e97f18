"""The LogStore contract, run against MemoryLogStore and FileLogStore alike (ZODB's
conformance mixins, Tansu's memory:// engine)."""

from __future__ import annotations

import asyncio
import errno

import pytest

from storage.api import LogRecord, StorageError
from storage.file_store import FileLogStore
from storage.format import iter_batches
from storage.memory_store import MemoryLogStore
from tests.support.storage_seams import FailingIO

PARTITIONS = 3


class MemoryHarness:
    reopens = False

    def __init__(self, tmp_path):
        self.store = MemoryLogStore(num_partitions=PARTITIONS)

    def append_failing(self, partition, records, timestamp_ms):
        """Append a batch whose write fails."""
        append = self.store.append(partition, records, timestamp_ms)
        self.store.fail(partition, OSError(errno.ENOSPC, "No space left on device"))
        return append

    async def reopen(self):
        raise AssertionError("memory store does not survive a restart")


class FileHarness:
    reopens = True

    def __init__(self, tmp_path):
        self.data_dir = tmp_path / "data"
        self.io = FailingIO()
        self.store = FileLogStore(self.data_dir, num_partitions=PARTITIONS, io=self.io)

    def append_failing(self, partition, records, timestamp_ms):
        self.io.fail_next("write", partial=7)
        return self.store.append(partition, records, timestamp_ms)

    async def reopen(self):
        await self.store.close()
        self.store = FileLogStore(self.data_dir, num_partitions=PARTITIONS, io=self.io)
        await self.store.open()


@pytest.fixture(params=[MemoryHarness, FileHarness], ids=["memory", "file"])
async def harness(request, tmp_path):
    h = request.param(tmp_path)
    await h.store.open()
    yield h
    await h.store.close()


def rec(key: bytes, value: bytes | None, **headers: bytes | None) -> LogRecord:
    return LogRecord(key, value, tuple(headers.items()))


def state(store, partition):
    return [(r.offset, r.timestamp_ms, r.key, r.value, r.headers)
            for batch in store.read(partition) for r in batch.records]


async def test_round_trip_keeps_keys_values_headers_tombstones_and_timestamps(harness):
    store = harness.store
    first = store.append(1, [rec(b"a", b"1", member_id=b"m-1", client_host=None), rec(b"b", None)], 1_000)
    second = store.append(1, [rec(b"", b"")], 2_000)
    assert (first.last_offset, second.last_offset) == (1, 2)
    assert await first.durable == 1
    assert await second.durable == 2
    assert state(store, 1) == [
        (0, 1_000, b"a", b"1", (("member_id", b"m-1"), ("client_host", None))),
        (1, 1_000, b"b", None, ()),
        (2, 2_000, b"", b"", ()),
    ]
    batches = list(store.read(1))
    assert [(b.base_offset, b.last_offset, b.is_control) for b in batches] == [(0, 1, False), (2, 2, False)]
    assert store.end_offset(1) == 3
    assert list(store.read(0)) == [] and store.end_offset(0) == 0


async def test_offsets_are_contiguous_per_partition_and_partitions_are_independent(harness):
    store = harness.store
    appends = [store.append(i % 2, [rec(b"k", b"%d" % i)] * (i % 3 + 1), i) for i in range(12)]
    await asyncio.gather(*(a.durable for a in appends))
    for p in (0, 1):
        offsets = [r[0] for r in state(store, p)]
        assert offsets == list(range(len(offsets)))
        assert store.end_offset(p) == len(offsets)
    assert state(store, 2) == []


async def test_read_from_an_offset_starts_at_the_batch_holding_it(harness):
    store = harness.store
    appends = [store.append(0, [rec(b"k", b"%d" % i), rec(b"j", b"x")], i) for i in range(5)]
    await appends[-1].durable
    assert [b.base_offset for b in store.read(0, 5)] == [4, 6, 8]
    assert list(store.read(0, 10)) == []


async def test_read_durable_gives_whole_batches_within_max_bytes_and_the_durable_bounds(harness):
    store = harness.store
    appends = [store.append(0, [rec(b"k", b"%d" % i), rec(b"j", b"x")], i) for i in range(5)]
    await appends[-1].durable
    whole = store.read_durable(0, 0, 1 << 20)
    assert (whole.log_start_offset, whole.durable_end_offset) == (0, 10)
    batches = list(iter_batches(whole.data))
    assert [(b.base_offset, [(r.key, r.value) for r in b.records]) for _, b in batches] == [
        (2 * i, [(b"k", b"%d" % i), (b"j", b"x")]) for i in range(5)]
    one = len(whole.data) // 5
    # From the middle of a batch: that batch whole; a limit below one batch still gives one.
    assert store.read_durable(0, 5, 1).data == whole.data[2 * one:3 * one]
    assert store.read_durable(0, 5, 2 * one + 1).data == whole.data[2 * one:4 * one]
    assert store.read_durable(0, 10, 1 << 20) == (b"", 0, 10)


async def test_read_durable_stops_at_the_durable_end(harness):
    store = harness.store
    first = store.append(2, [rec(b"k", b"v")], 1)
    await first.durable
    pending = store.append(2, [rec(b"k", b"w")], 2)
    read = store.read_durable(2, 0, 1 << 20)
    assert read.durable_end_offset <= 2
    assert [b.last_offset for _, b in iter_batches(read.data)] == list(range(read.durable_end_offset))
    await pending.durable
    assert store.read_durable(2, 1, 1 << 20).durable_end_offset == 2


async def test_durable_futures_resolve_in_offset_order(harness):
    store = harness.store
    resolved = []
    appends = [store.append(0, [rec(b"k", b"%d" % i)], i) for i in range(20)]
    for a in appends:
        a.durable.add_done_callback(lambda f: resolved.append(f.result()))
    await asyncio.gather(*(a.durable for a in appends))
    assert resolved == list(range(20))


async def test_an_append_without_records_is_a_barrier_behind_earlier_batches(harness):
    store = harness.store
    resolved = []
    first = store.append(0, [rec(b"k", b"v")], 1)
    barrier = store.append(0, [], 2)
    for a in (first, barrier):
        a.durable.add_done_callback(lambda f: resolved.append(f))
    await barrier.durable
    assert resolved == [first.durable, barrier.durable]
    assert barrier.last_offset == 0 and store.end_offset(0) == 1


async def test_failed_write_fails_later_appends_until_recover_restores_the_durable_prefix(harness):
    store = harness.store
    good = store.append(0, [rec(b"a", b"1")], 1)
    await good.durable
    bad = harness.append_failing(0, [rec(b"a", b"2"), rec(b"b", b"2")], 2)
    with pytest.raises(StorageError):
        await bad.durable
    later = store.append(0, [rec(b"a", b"3")], 3)
    with pytest.raises(StorageError):
        await later.durable
    assert isinstance(store.partition_error(0), StorageError)
    with pytest.raises(StorageError):
        list(store.read(0))
    # The other partitions never noticed.
    other = store.append(1, [rec(b"x", b"y")], 4)
    assert await other.durable == 0

    assert await store.recover(0) == 1
    assert store.partition_error(0) is None
    assert state(store, 0) == [(0, 1, b"a", b"1", ())]
    after = store.append(0, [rec(b"a", b"4")], 5)
    assert after.last_offset == 1
    assert await after.durable == 1
    assert [r[3] for r in state(store, 0)] == [b"1", b"4"]
    if harness.reopens:
        await harness.reopen()
        assert [r[3] for r in state(harness.store, 0)] == [b"1", b"4"]


async def test_reopen_gives_the_same_batches(harness):
    if not harness.reopens:
        pytest.skip("memory store does not survive a restart")
    store = harness.store
    appends = [store.append(p, [rec(b"k%d" % i, b"v" * i, g=b"%d" % i), rec(b"t", None)], 10 * i)
               for i in range(6) for p in range(PARTITIONS)]
    await asyncio.gather(*(a.durable for a in appends))
    before = [list(store.read(p)) for p in range(PARTITIONS)]
    await harness.reopen()
    assert [list(harness.store.read(p)) for p in range(PARTITIONS)] == before
    assert [harness.store.end_offset(p) for p in range(PARTITIONS)] == [12] * PARTITIONS
    nxt = harness.store.append(2, [rec(b"n", b"n")], 99)
    assert await nxt.durable == 12


async def test_a_prepared_batch_is_appended_as_append_would_and_only_at_the_offset_it_was_prepared_for(harness):
    store = harness.store
    store.append(0, [rec(b"before", b"0")], 5)
    records = [rec(b"k%d" % i, b"%d" % i, member_id=b"m") for i in range(4_500)]    # more than one slice
    prepared = await store.prepare(0, records, 9)
    appended = store.append_prepared(prepared)
    assert appended.last_offset == 4_500 and await appended.durable == 4_500
    assert [(b.base_offset, b.last_offset) for b in store.read(0)] == [(0, 0), (1, 4_500)]
    assert state(store, 0)[1:] == [(1 + i, 9, r.key, r.value, r.headers) for i, r in enumerate(records)]
    stale = await store.prepare(0, records[:2], 10)
    store.append(0, [rec(b"meanwhile", b"x")], 10)
    with pytest.raises(StorageError):
        store.append_prepared(stale)
    if harness.reopens:
        await harness.reopen()
        assert state(harness.store, 0)[1:4_501] == [(1 + i, 9, r.key, r.value, r.headers) for i, r in enumerate(records)]
