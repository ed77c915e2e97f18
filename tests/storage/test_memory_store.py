"""MemoryLogStore's manual mode: the test decides when batches become durable or fail."""

from __future__ import annotations

import asyncio
import errno

import pytest

from storage.api import LogRecord, StorageError
from storage.memory_store import MemoryLogStore


def one(i: int) -> list[LogRecord]:
    return [LogRecord(b"k%d" % i, b"v%d" % i)]


async def test_manual_commit_releases_exactly_the_batches_up_to_the_offset():
    store = MemoryLogStore(num_partitions=2, manual_commit=True)
    appends = [store.append(0, one(i), i) for i in range(3)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert not any(a.durable.done() for a in appends)
    assert list(store.read(0)) == []

    store.commit(0, 1)
    assert [a.durable.done() for a in appends] == [True, True, False]
    assert [b.base_offset for b in store.read(0)] == [0, 1]
    assert store.end_offset(0) == 3


async def test_fail_fails_pending_and_later_appends_and_recover_returns_the_durable_end():
    store = MemoryLogStore(num_partitions=2, manual_commit=True)
    appends = [store.append(0, one(i), i) for i in range(3)]
    store.commit(0, 0)
    store.fail(0, OSError(errno.EIO, "I/O error"))
    for append in appends[1:]:
        with pytest.raises(StorageError, match="I/O error"):
            await append.durable
    with pytest.raises(StorageError):
        await store.append(0, one(3), 3).durable
    assert await store.recover(0) == 1
    again = store.append(0, one(4), 4)
    assert again.last_offset == 1
    store.commit(0, 1)
    assert [r.key for b in store.read(0) for r in b.records] == [b"k0", b"k4"]
