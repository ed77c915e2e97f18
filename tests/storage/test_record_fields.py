"""`record_fields`, the lean walk a load reads batches with, against the full decoder and
kafka-python's writer; and the file store's `read_fields` over real segment files."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from storage.api import CorruptLogError, LogRecord, StoredBatch, StoredRecord
from storage.file_store import FileLogStore, partition_dir
from storage.format import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchDecodeError,
    BatchReader,
    Compression,
    decode_batch,
    encode_batch,
    encode_stored_batch,
    record_fields,
)
from tests.support.batch_edits import restamp_crc

header_lists = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=4)
payloads = st.none() | st.binary(max_size=100) | st.integers(60, 9000).map(lambda n: b"x" * n)


@st.composite
def kafka_python_batches(draw) -> bytes:
    """A batch as a producer writes one: offset gaps (a compacted batch), timestamps far
    from the base, keys and values of one- to three-byte lengths, optional gzip."""
    compression = draw(st.sampled_from([Compression.NONE, Compression.GZIP]))
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    offset = 0
    for _ in range(draw(st.integers(1, 12))):
        assert builder.append(offset, timestamp=draw(st.integers(0, 2**45)), key=draw(payloads),
                              value=draw(payloads), headers=draw(header_lists))
        offset += draw(st.integers(1, 200))
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, draw(st.integers(0, 2**40)))   # the broker assigns offsets
    return bytes(buf)


def fields_of(batch: StoredBatch) -> list[tuple]:
    return [(r.offset, r.key, r.value) for r in batch.records]


@settings(max_examples=150, deadline=None)
@given(buf=kafka_python_batches())
def test_record_fields_are_the_decoders_offsets_keys_and_values(buf):
    [(position, header)] = list(BatchReader(buf).headers())
    assert record_fields(buf, position, header) == fields_of(decode_batch(buf, position, header))


def test_record_fields_reads_a_batch_in_the_middle_of_a_buffer():
    first = encode_batch(0, [LogRecord(b"a", b"1")], 5)
    # A keyless record as the log's format allows it (kgc never writes one: LogRecord keys are bytes).
    second = encode_stored_batch(StoredBatch(1, 1, (StoredRecord(1, 5, b"b", None, (("h", b"x"),)),
                                                    StoredRecord(2, 5, None, b"2"))))
    walked = [record_fields(first + second, p, h) for p, h in BatchReader(first + second).headers()]
    assert walked == [[(0, b"a", b"1")], [(1, b"b", None), (2, None, b"2")]]


def damaged(edit) -> tuple[bytes, int, object]:
    records = [LogRecord(b"a", b"v", (("h", b"x"),)), LogRecord(b"b", b"v", (("h", b"x"),))]
    buf = bytearray(encode_batch(0, records, 5))
    edit(buf)
    buf = restamp_crc(buf)
    [(position, header)] = list(BatchReader(buf).headers())
    return buf, position, header


def _longer_last_record(buf: bytearray) -> None:
    buf[buf.rindex(b"\x00\x00\x02\x02b") - 1] += 2          # zig-zag: one byte more than it has


def _shorter_last_record(buf: bytearray) -> None:
    buf[buf.rindex(b"\x00\x00\x02\x02b") - 1] -= 2          # its last byte is left after it


def _one_more_record(buf: bytearray) -> None:
    struct.pack_into(">i", buf, 57, 3)                      # recordsCount


@pytest.mark.parametrize("edit", [_longer_last_record, _shorter_last_record, _one_more_record])
def test_record_fields_refuses_what_the_decoder_refuses(edit):
    buf, position, header = damaged(edit)
    with pytest.raises(BatchDecodeError):
        decode_batch(buf, position, header)
    with pytest.raises(BatchDecodeError):
        record_fields(buf, position, header)


async def test_read_fields_is_read_without_timestamps_and_headers_and_flags_transactional_batches(tmp_path):
    # given a segment as a real cluster writes it: a transactional commit, its marker, more
    commit = StoredRecord(0, 1_000, b"k", b"v", (("h", b"1"),))
    marker = StoredRecord(1, 1_000, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))
    segment = b"".join([
        encode_stored_batch(StoredBatch(0, 0, (commit,), attributes=TRANSACTIONAL_FLAG, producer_id=9,
                                        producer_epoch=0, base_sequence=0)),
        encode_stored_batch(StoredBatch(1, 1, (marker,), attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG,
                                        producer_id=9, producer_epoch=0)),
    ])
    directory = partition_dir(tmp_path, 0)
    directory.mkdir(parents=True)
    (directory / f"{0:020d}.log").write_bytes(segment)
    store = FileLogStore(tmp_path, num_partitions=1, fsync="never")
    await store.open()
    try:
        await store.append(0, [LogRecord(b"k", None), LogRecord(b"j", b"w")], 2_000).durable
        fields = list(store.read_fields(0))
        # the transactional batch says so (a loader re-reads it with its producer); the marker has no fields
        assert fields == [(True, [(0, b"k", b"v")]), (True, []), (False, [(2, b"k", None), (3, b"j", b"w")])]
        assert [fields_of(b) for b in store.read(0) if not b.is_control] == [f for _, f in fields if f]
        # from an offset, as `read`: batches that end before it are left out
        assert list(store.read_fields(0, 2)) == [(False, [(2, b"k", None), (3, b"j", b"w")])]
    finally:
        await store.close()


async def test_a_batch_whose_records_do_not_walk_is_corruption_named_by_file_and_byte(tmp_path):
    good = encode_batch(0, [LogRecord(b"a", b"1")], 5)
    bad, _, _ = damaged(_one_more_record)
    bad = bytearray(bad)
    struct.pack_into(">q", bad, 0, 1)                       # baseOffset after the good batch
    bad = restamp_crc(bad)
    directory = partition_dir(tmp_path, 0)
    directory.mkdir(parents=True)
    path = directory / f"{0:020d}.log"
    path.write_bytes(good + bad)
    store = FileLogStore(tmp_path, num_partitions=1, fsync="never")
    await store.open()
    try:
        with pytest.raises(CorruptLogError) as err:
            list(store.read_fields(0))
        assert (err.value.path, err.value.position) == (str(path), len(good))
    finally:
        await store.close()
