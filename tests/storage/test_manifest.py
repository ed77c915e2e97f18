"""Closed-segment integrity: what each closed segment must be is recorded when it closes
(`segments.manifest`), so damage the batch CRCs cannot see refuses the partition with the
file, byte and offsets named, at open and while running; `accept_loss` (kgc repair) is the
explicit way back. A flipped byte and a torn active tail keep their own handling."""

from __future__ import annotations

import json
import os

import pytest

from coordinator.offline.repair import accept_loss
from storage.api import CorruptLogError, LogRecord
from storage.dir_lock import DataDirInUse
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch
from storage.manifest import MANIFEST_NAME
from storage.segment import segment_name
from tests.support.data_dirs import partitions_held

BATCH_BYTES = len(encode_batch(0, [LogRecord(b"k00", b"v000")], 0))
RECORDS = 12        # three records a segment: closed segments at 0, 3, 6; active at 9


async def open_store(data_dir, num_partitions: int = 2) -> FileLogStore:
    store = FileLogStore(data_dir, num_partitions=num_partitions, segment_bytes=3 * BATCH_BYTES)
    await store.open()
    return store


async def written(data_dir) -> None:
    store = await open_store(data_dir)
    for i in range(RECORDS):
        for p in (0, 1):
            await store.append(p, [LogRecord(b"k%02d" % i, b"v%03d" % i)], 0).durable
    await store.close()


def segment(data_dir, base: int, partition: int = 0):
    return partition_dir(data_dir, partition) / segment_name(base)


def offsets(store, partition: int = 0) -> list[int]:
    return [r.offset for b in store.read(partition) for r in b.records]


async def refusal(data_dir) -> CorruptLogError:
    store = await open_store(data_dir)
    try:
        error = store.partition_error(0)
        assert isinstance(error, CorruptLogError), error
        assert store.partition_error(1) is None and offsets(store, 1) == list(range(RECORDS))
        return error
    finally:
        await store.close()


async def test_the_manifest_records_every_closed_segment_and_the_active_one(tmp_path):
    await written(tmp_path)
    manifest = json.loads((partition_dir(tmp_path, 0) / MANIFEST_NAME).read_text())
    assert manifest["active_base"] == 9
    assert {base: [s["size"] for s in states] for base, states in manifest["closed"].items()} == {
        "0": [3 * BATCH_BYTES], "3": [3 * BATCH_BYTES], "6": [3 * BATCH_BYTES]}
    assert [s[0]["last_offset"] for s in manifest["closed"].values()] == [2, 5, 8]


async def test_a_closed_segment_truncated_at_a_batch_boundary_is_refused(tmp_path):
    await written(tmp_path)
    os.truncate(segment(tmp_path, 3), BATCH_BYTES)
    error = await refusal(tmp_path)
    assert error.path == str(segment(tmp_path, 3)) and error.position == BATCH_BYTES
    assert "truncated" in error.reason and "offsets 4-5 lost" in error.reason


async def test_an_emptied_closed_segment_is_refused(tmp_path):
    await written(tmp_path)
    os.truncate(segment(tmp_path, 0), 0)
    error = await refusal(tmp_path)
    assert error.path == str(segment(tmp_path, 0)) and "emptied" in error.reason and "offsets 0-2 lost" in error.reason


async def test_a_closed_segment_deleted_between_two_present_ones_is_refused(tmp_path):
    await written(tmp_path)
    os.unlink(segment(tmp_path, 3))
    error = await refusal(tmp_path)
    assert error.path == str(segment(tmp_path, 3)) and "missing: offsets 3-5 lost" in error.reason


async def test_the_last_closed_segment_deleted_is_refused(tmp_path):
    await written(tmp_path)
    os.unlink(segment(tmp_path, 6))
    error = await refusal(tmp_path)
    assert "offsets 6-8 lost" in error.reason


async def test_the_active_segment_deleted_is_refused(tmp_path):
    await written(tmp_path)
    os.unlink(segment(tmp_path, 9))
    error = await refusal(tmp_path)
    assert error.path == str(segment(tmp_path, 9)) and "active segment missing: offsets from 9 lost" in error.reason


async def test_a_closed_segment_whose_bytes_changed_keeps_its_crc_refusal(tmp_path):
    await written(tmp_path)
    path = segment(tmp_path, 3)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    error = await refusal(tmp_path)
    assert error.path == str(path) and "closed segment" in error.reason


async def test_damage_while_running_is_found_by_verify_and_refuses_the_partition(tmp_path):
    await written(tmp_path)
    store = await open_store(tmp_path)
    try:
        assert await store.verify(0) is None
        os.unlink(segment(tmp_path, 3))     # unlinked while kgc runs
        damage = await store.verify(0)
        assert isinstance(damage, CorruptLogError) and "offsets 3-5 lost" in damage.reason
        assert store.partition_error(0) is damage
        with pytest.raises(CorruptLogError):
            store.append(0, [LogRecord(b"k", b"v")], 0)
        assert await store.verify(1) is None and store.partition_error(1) is None
        # a restart refuses it the same way
        await store.close()
        assert "offsets 3-5 lost" in (await refusal(tmp_path)).reason
    finally:
        await store.close()


async def test_accepting_the_loss_brings_the_partition_back_with_what_survives(tmp_path):
    await written(tmp_path)
    os.unlink(segment(tmp_path, 3))
    await refusal(tmp_path)
    accepted = accept_loss(tmp_path, 0)
    assert any("offsets 3-5 lost" in line for line in accepted)
    store = await open_store(tmp_path)
    try:
        assert store.partition_error(0) is None
        assert offsets(store) == [0, 1, 2, 6, 7, 8, 9, 10, 11]
        await store.append(0, [LogRecord(b"new", b"v")], 0).durable
    finally:
        await store.close()
    store = await open_store(tmp_path)
    try:
        assert store.partition_error(0) is None and offsets(store)[-1] == RECORDS
    finally:
        await store.close()


async def test_accepting_a_crc_damaged_closed_segment_cuts_it_and_keeps_the_evidence(tmp_path):
    await written(tmp_path)
    path = segment(tmp_path, 3)
    data = bytearray(path.read_bytes())
    data[BATCH_BYTES + 30] ^= 0xFF      # inside the second batch
    path.write_bytes(bytes(data))
    await refusal(tmp_path)
    accept_loss(tmp_path, 0)
    assert (partition_dir(tmp_path, 0) / (segment_name(3) + ".torn-1")).stat().st_size == 2 * BATCH_BYTES
    store = await open_store(tmp_path)
    try:
        assert offsets(store) == [0, 1, 2, 3, 6, 7, 8, 9, 10, 11]
    finally:
        await store.close()


async def test_accepting_the_loss_of_a_partition_another_process_holds_changes_nothing(tmp_path):
    await written(tmp_path)
    os.unlink(segment(tmp_path, 3))
    manifest = (partition_dir(tmp_path, 0) / MANIFEST_NAME).read_bytes()
    with partitions_held(tmp_path, [0]) as holder:
        with pytest.raises(DataDirInUse, match=f"another kgc process \\(pid {holder.pid}\\) serves partition 0$"):
            accept_loss(tmp_path, 0)
        assert (partition_dir(tmp_path, 0) / MANIFEST_NAME).read_bytes() == manifest
        assert accept_loss(tmp_path, 1) == []       # a partition it does not hold: nothing was damaged
    assert any("offsets 3-5 lost" in line for line in accept_loss(tmp_path, 0))


async def test_a_data_dir_without_a_manifest_gets_one_from_what_is_on_disk(tmp_path):
    await written(tmp_path)
    for p in (0, 1):
        os.unlink(partition_dir(tmp_path, p) / MANIFEST_NAME)
    store = await open_store(tmp_path)
    try:
        assert store.partition_error(0) is None and offsets(store) == list(range(RECORDS))
    finally:
        await store.close()
    assert (partition_dir(tmp_path, 0) / MANIFEST_NAME).exists()
    os.truncate(segment(tmp_path, 6), 0)
    assert "emptied" in (await refusal(tmp_path)).reason


async def test_a_roll_stopped_before_it_recorded_the_closed_segment_loads(tmp_path):
    await written(tmp_path)
    path = partition_dir(tmp_path, 0) / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    del manifest["closed"]["6"]
    manifest["active_base"] = 6         # the new segment was created, the manifest not yet written
    path.write_text(json.dumps(manifest))
    store = await open_store(tmp_path)
    try:
        assert store.partition_error(0) is None and offsets(store) == list(range(RECORDS))
    finally:
        await store.close()
