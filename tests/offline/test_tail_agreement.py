"""One judgement of where an active segment's log stops (`storage.format.judge_tail`):
recovery, `kgc inspect` and the audit's scanners agree on every kind of tail. A tail that
`kgc serve` cuts as a torn write (keeping its bytes) is a write in progress to the audit,
never damage; damage is never cut."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator.offline.columns import scan_columns
from coordinator.offline.inspect import inspect_data_dir
from coordinator.offline.scan import PartitionScan
from storage.api import CorruptLogError, LogRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import encode_batch
from storage.segment import TORN_SUFFIX, segment_name

BATCHES = 3


def record(i: int) -> list[LogRecord]:
    return [LogRecord(b"key-%d" % i, b"value-%d" % i)]


def sound_log() -> bytes:
    return b"".join(encode_batch(i, record(i), 1_000 + i) for i in range(BATCHES))


def next_batch() -> bytes:
    return encode_batch(BATCHES, record(BATCHES), 2_000)


def bad_length() -> bytes:
    # The header's first bytes landed, its length field did not (zero), later pages did.
    batch = next_batch()
    return batch[:8] + b"\0\0\0\0" + batch[12:40]


def bad_crc_then_bytes() -> bytes:
    # A whole batch whose last page never landed, then the start of the next append.
    batch = bytearray(next_batch())
    batch[-4:] = b"\xff\xff\xff\xff"
    return bytes(batch) + encode_batch(BATCHES + 1, record(BATCHES + 1), 2_001)[:20]


def short() -> bytes:
    return next_batch()[:30]


TORN_TAILS = {"short": short, "bad length": bad_length, "bad CRC, then more bytes": bad_crc_then_bytes}


def write_log(data_dir, tail: bytes):
    directory = partition_dir(data_dir, 0)
    directory.mkdir(parents=True)
    (directory / segment_name(0)).write_bytes(sound_log() + tail)
    return directory


def offline_verdicts(data_dir, directory):
    """(tail bytes, problems) of both scanners, and inspect's (torn, damaged)."""
    record_scan = PartitionScan(0, directory)
    list(record_scan)
    column_scan = scan_columns(0, directory).scan
    damage = inspect_data_dir(data_dir, num_partitions=1).partitions[0].segments[-1].damage
    return [(s.tail_bytes, [f.type.name for f in s.problems]) for s in (record_scan, column_scan)], damage


async def recover(data_dir):
    store = FileLogStore(data_dir, num_partitions=1, fsync="never", preallocate_bytes=0)
    await store.open()
    try:
        error = store.partition_error(0)
        return error, None if error else store.end_offset(0)
    finally:
        await store.close()


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
async def test_a_torn_tail_is_cut_by_recovery_and_in_progress_to_the_audit(tmp_path, tail):
    torn = tail()
    directory = write_log(tmp_path, torn)
    scans, damage = offline_verdicts(tmp_path, directory)
    assert scans == [(len(torn.rstrip(b"\0")), [])] * 2
    assert damage is not None and damage.torn_tail
    assert await recover(tmp_path) == (None, BATCHES)
    evidence = directory / f"{segment_name(0)}{TORN_SUFFIX}1"
    assert evidence.read_bytes() == torn.rstrip(b"\0")


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
async def test_the_same_bytes_before_a_sound_batch_are_damage_to_every_reader(tmp_path, tail):
    directory = write_log(tmp_path, tail() + encode_batch(BATCHES + 5, record(9), 3_000))
    scans, damage = offline_verdicts(tmp_path, directory)
    assert all(tail_bytes == 0 and problems for tail_bytes, problems in scans)
    assert damage is not None and not damage.torn_tail and "a sound batch follows" in damage.reason
    error, _end = await recover(tmp_path)
    assert isinstance(error, CorruptLogError)
    assert not list(directory.glob(f"*{TORN_SUFFIX}*"))
