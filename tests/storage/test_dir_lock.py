"""The data dir's partition locks (storage/dir_lock.py) and a store of some partitions.

Record locks belong to a process, so two stores of this one never conflict in the
kernel: a lock another process holds is held here by a child (`partitions_held`)."""

from __future__ import annotations

import os

import pytest

from storage.api import LogRecord
from storage.dir_lock import LOCK_FILE, DataDirInUse, lock_partitions, partition_list
from storage.file_store import TOPIC, FileLogStore, PartitionNotHeld, partition_dirs
from tests.support.data_dirs import lock_elsewhere, partitions_held

RECORD = [LogRecord(b"k", b"v")]


def store_of(tmp_path, partitions=None) -> FileLogStore:
    return FileLogStore(tmp_path, fsync="never", clock=lambda: 0, partitions=partitions)


def test_partitions_are_named_in_runs():
    assert partition_list([7]) == "partition 7"
    assert partition_list(range(50)) == "partitions 0-49"
    assert partition_list([9, 3, 5, 6, 7, 8, 3]) == "partitions 3, 5-9"


async def test_a_store_of_some_partitions_opens_and_writes_only_those(tmp_path):
    store = store_of(tmp_path, [3, 7])
    await store.open()
    try:
        assert sorted(partition_dirs(tmp_path)) == [3, 7]
        assert (await store.append(7, RECORD, 0).durable) == 0
        assert [b.last_offset for b in store.read(7)] == [0]
        for call in (lambda: store.append(8, RECORD, 0), lambda: store.read(8), lambda: store.end_offset(8),
                     lambda: store.read_fields(8), lambda: store.read_durable(8, 0, 1024)):
            with pytest.raises(PartitionNotHeld, match="^partition 8 is not held by this store$"):
                call()
        for coroutine in (store.recover(8), store.clean(8), store.verify(8), store.acquire(8),
                          store.prepare(8, RECORD, 0)):
            with pytest.raises(PartitionNotHeld, match="partition 8 is not held"):
                await coroutine
        # The loader asks before it reads: the partition fails to load, naming why.
        assert isinstance(store.partition_error(8), PartitionNotHeld)
        assert store.partition_error(7) is None
    finally:
        await store.close()
    assert sorted(partition_dirs(tmp_path)) == [3, 7]


def test_partitions_outside_the_store_are_refused_when_it_is_made(tmp_path):
    with pytest.raises(ValueError, match=r"partitions \[50\] are not among the 50"):
        store_of(tmp_path, [0, 50])


async def test_a_partition_held_by_another_process_refuses_the_whole_open(tmp_path):
    with partitions_held(tmp_path, range(0, 10)) as holder:
        everything = store_of(tmp_path)
        with pytest.raises(DataDirInUse) as refused:
            await everything.open()
        assert str(refused.value) == (f"data dir {tmp_path}: another kgc process (pid {holder.pid}) serves "
                                      "partitions 0-9")
        assert refused.value.partitions == frozenset(range(10)) and refused.value.pids == (holder.pid,)
        # Nothing was opened, and what was locked before the refusal is let go again.
        assert sorted(partition_dirs(tmp_path)) == list(range(10))
        await everything.close()

        # Beside it, a store of the other partitions opens and writes.
        rest = store_of(tmp_path, range(10, 50))
        await rest.open()
        try:
            assert (await rest.append(10, RECORD, 0).durable) == 0
        finally:
            await rest.close()


async def test_the_locks_go_with_a_killed_process_and_with_a_closed_store(tmp_path):
    with partitions_held(tmp_path, [4]) as holder:
        with pytest.raises(DataDirInUse, match="serves partition 4$"):
            await store_of(tmp_path).open()
        holder.kill()       # kill -9: no close, the kernel lets the locks go
        store = store_of(tmp_path)
        await store.open()
        await store.close()
    with partitions_held(tmp_path, [4]) as holder:
        holder.release()
        store = store_of(tmp_path)
        await store.open()
        await store.close()


async def test_a_store_that_closes_leaves_the_locks_of_another_in_this_process(tmp_path):
    # Closing any descriptor of the lock file would drop every lock of this process on it:
    # the process has one, kept while any store holds partitions through it.
    first, second = store_of(tmp_path, range(0, 25)), store_of(tmp_path, range(25, 50))
    await first.open()
    await second.open()
    await first.close()
    try:
        assert lock_elsewhere(tmp_path, [30]).endswith(f"(pid {os.getpid()}) serves partition 30")
        assert lock_elsewhere(tmp_path, [0]) == "locked"      # the closed store's are free
    finally:
        await second.close()
    assert lock_elsewhere(tmp_path, range(50)) == "locked"


async def test_two_stores_of_this_process_never_hold_one_partition(tmp_path):
    first = store_of(tmp_path, [1, 2])
    await first.open()
    try:
        second = store_of(tmp_path, [2, 3])
        with pytest.raises(DataDirInUse, match=f"^data dir {tmp_path}: another store of this process holds "
                                               "partition 2$"):
            await second.open()
        # The refused store took nothing: partition 3 is free, and the first still writes.
        third = store_of(tmp_path, [3])
        await third.open()
        await third.close()
        assert (await first.append(2, RECORD, 0).durable) == 0
    finally:
        await first.close()


def test_a_lock_is_one_byte_per_partition_of_one_file_that_nothing_reads_as_a_partition(tmp_path):
    with lock_partitions(tmp_path, [0, 49]) as locks:
        assert locks.partitions == frozenset({0, 49})
        assert [p.name for p in tmp_path.iterdir()] == [LOCK_FILE]
        assert partition_dirs(tmp_path) == {}
    (tmp_path / f"{TOPIC}-0").mkdir()
    assert partition_dirs(tmp_path) == {0: tmp_path / f"{TOPIC}-0"}
    with lock_partitions(tmp_path, [0]):          # released by the `with`: taken again
        pass


async def test_partitions_of_several_processes_name_each_process(tmp_path):
    with partitions_held(tmp_path, [0, 1, 2]) as one, partitions_held(tmp_path, [5]) as other:
        with pytest.raises(DataDirInUse) as refused:
            await store_of(tmp_path, range(10)).open()
    low, high = sorted((one.pid, other.pid))
    assert refused.value.reason == f"other kgc processes (pids {low}, {high}) serve partitions 0-2, 5"
