"""A failed write or fsync fails its partition; recover brings back the durable prefix
and nothing half-written is ever loaded. One test fills a real (tmpfs) filesystem; the
others fail one operation through the SegmentIO seam."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from storage.api import LogRecord, StorageError
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch
from storage.manifest import MANIFEST_NAME
from storage.segment import segment_name
from tests.support.storage_seams import FailingIO
from tests.support.waiting import wait_until


def one(i: int, size: int = 8) -> list[LogRecord]:
    return [LogRecord(b"k%d" % i, b"v" * size)]


BATCH_BYTES = len(encode_batch(0, one(0), 0))


async def keys(store, partition=0):
    return [r.key for b in store.read(partition) for r in b.records]


@pytest.mark.parametrize("op,partial", [("write", 0), ("write", 5), ("fsync", 0)])
async def test_failure_cuts_the_segment_back_to_the_durable_mark(tmp_path, op, partial):
    io = FailingIO()
    store = FileLogStore(tmp_path, num_partitions=1, io=io)
    await store.open()
    try:
        await store.append(0, one(0), 0).durable
        segment = partition_dir(tmp_path, 0) / segment_name(0)
        durable_size = BATCH_BYTES       # the file is longer: its preallocated tail
        io.fail_next(op, partial=partial)
        failed = [store.append(0, one(i), i) for i in (1, 2)]
        for append in failed:
            with pytest.raises(StorageError, match="No space left on device"):
                await append.durable
        assert isinstance(store.partition_error(0).__cause__, OSError)
        assert await store.recover(0) == 1
        assert segment.stat().st_size == durable_size
        assert await keys(store) == [b"k0"]
        assert await store.append(0, one(3), 3).durable == 1
    finally:
        await store.close()


async def test_a_failed_roll_drops_the_segment_it_created(tmp_path):
    io = FailingIO()
    store = FileLogStore(tmp_path, num_partitions=1, segment_bytes=2 * BATCH_BYTES, io=io)
    await store.open()
    try:
        for i in range(2):
            await store.append(0, one(i), i).durable
        io.fail_next("write")                 # the first write after the roll
        with pytest.raises(StorageError):
            await store.append(0, one(2), 2).durable
        assert (partition_dir(tmp_path, 0) / segment_name(2)).exists()
        assert await store.recover(0) == 2
        assert sorted(os.listdir(partition_dir(tmp_path, 0))) == [segment_name(0), MANIFEST_NAME]
        assert await keys(store) == [b"k0", b"k1"]
        assert await store.append(0, one(2), 2).durable == 2
    finally:
        await store.close()
    reopened = FileLogStore(tmp_path, num_partitions=1, segment_bytes=2 * BATCH_BYTES)
    await reopened.open()
    try:
        assert await keys(reopened) == [b"k0", b"k1", b"k2"]
    finally:
        await reopened.close()


async def test_a_failed_deferred_fsync_fails_the_partition(tmp_path):
    io = FailingIO()
    store = FileLogStore(tmp_path, num_partitions=1, fsync="interval:20", io=io)
    await store.open()
    try:
        io.fail_next("fsync")
        await store.append(0, one(0), 0).durable       # released on write
        # The deferred fsync is due in 20 ms.
        await wait_until(lambda: store.partition_error(0) is not None, what="the failed fsync reported")
        assert isinstance(store.partition_error(0), StorageError)
        with pytest.raises(StorageError):
            await store.append(0, one(1), 1).durable
        # Under `interval` a written batch was acknowledged: recovery keeps it.
        assert await store.recover(0) == 1
        assert await keys(store) == [b"k0"]
    finally:
        await store.close()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 64 KiB filesystem, or a skip where mounting is not allowed."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
                            capture_output=True, timeout=10)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True, timeout=10)


async def test_a_full_filesystem_fails_the_partition_and_recovery_keeps_every_acknowledged_batch(small_tmpfs):
    store = FileLogStore(small_tmpfs / "data", num_partitions=1)
    await store.open()
    acknowledged = []
    try:
        failure = None
        for i in range(200):                           # bounded: 64 KiB holds well under 200 of these
            try:
                await store.append(0, one(i, 1000), i).durable
            except StorageError as e:
                failure = e
                break
            acknowledged.append(b"k%d" % i)
        assert failure is not None and acknowledged
        assert isinstance(failure.__cause__, OSError) and failure.__cause__.errno == errno.ENOSPC
        with pytest.raises(StorageError):
            await store.append(0, one(999), 999).durable
        assert await store.recover(0) == len(acknowledged)
        assert await keys(store) == acknowledged
    finally:
        await store.close()
    reopened = FileLogStore(small_tmpfs / "data", num_partitions=1)
    await reopened.open()
    try:
        assert reopened.partition_error(0) is None
        assert await keys(reopened) == acknowledged
        assert not [p for p in os.listdir(partition_dir(small_tmpfs / "data", 0)) if ".torn-" in p]
    finally:
        await reopened.close()


async def test_writes_the_kernel_cuts_short_are_finished(tmp_path, monkeypatch):
    """os.pwrite may write less than asked (a signal, a nearly full disk): the store
    writes the rest, so the batch on disk is whole and loads."""
    real_pwrite = os.pwrite
    calls = []

    def short_pwrite(fd, data, position):
        calls.append(len(data))
        return real_pwrite(fd, bytes(memoryview(data)[:7]), position)
    monkeypatch.setattr("storage.segment.os.pwrite", short_pwrite)
    store = FileLogStore(tmp_path, num_partitions=1, preallocate_bytes=0)
    await store.open()
    try:
        assert await store.append(0, one(0, size=40), 0).durable == 0
        assert await store.append(0, one(1, size=40), 1).durable == 1
    finally:
        await store.close()
    assert len(calls) > 2 * (BATCH_BYTES // 7)      # every batch took several writes
    monkeypatch.setattr("storage.segment.os.pwrite", real_pwrite)
    reopened = FileLogStore(tmp_path, num_partitions=1)
    await reopened.open()
    try:
        assert await keys(reopened) == [b"k0", b"k1"]
    finally:
        await reopened.close()
