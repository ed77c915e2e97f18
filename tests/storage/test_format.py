"""RecordBatch v2: our bytes against kafka-python's independent implementation, round
trips, and the stop reasons recovery relies on."""

from __future__ import annotations

import struct

import kafka.codec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import decode_varint

from storage.api import LogRecord, StoredBatch, StoredRecord
from storage.format import (
    ATTRIBUTES_POS,
    BATCH_HEADER_LEN,
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchDecodeError,
    BatchReader,
    Compression,
    ScanStop,
    StopReason,
    UnsupportedCompressionError,
    encode_batch,
    encode_stored_batch,
    encode_varint,
    find_sound_batch,
    iter_batches,
    sound_batches,
)
from tests.support.batch_edits import restamp_crc

RECORDS = [
    LogRecord(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x03value", (("member_id", b"m-1"), ("gen", None))),
    LogRecord(b"\x00\x02\x00\x01g", None),
]


def kafka_python_batch(compression: int, base_offset: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1_000 + i, key=b"k%d" % i, value=b"v" * 40 if i != 1 else None,
                       headers=[("h", b"%d" % i)])
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)     # the broker assigns offsets
    return bytes(buf)


def test_kafka_python_reads_our_batch_field_for_field():
    buf = encode_batch(42, RECORDS, 1_700_000_000_123)
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.magic, batch.attributes, batch.last_offset_delta) == (42, 2, 0, 1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.first_timestamp, batch.max_timestamp) == (1_700_000_000_123,) * 2
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == [
        (42, 1_700_000_000_123, RECORDS[0].key, RECORDS[0].value, [("member_id", b"m-1"), ("gen", None)]),
        (43, 1_700_000_000_123, RECORDS[1].key, None, []),
    ]
    assert struct.unpack_from(">i", buf, 8)[0] == len(buf) - 12
    assert struct.unpack_from(">i", buf, 12)[0] == -1          # partitionLeaderEpoch


def test_we_read_kafka_python_batches_uncompressed_and_gzip():
    expected = [(i, 1_000 + i, b"k%d" % i, b"v" * 40 if i != 1 else None, (("h", b"%d" % i),)) for i in range(3)]
    for compression in (Compression.NONE, Compression.GZIP):
        reader = iter_batches(kafka_python_batch(compression, base_offset=7))
        [(position, batch)] = list(reader)
        assert reader.stop is None and position == 0
        assert (batch.base_offset, batch.last_offset) == (7, 9)
        assert [(r.offset - 7, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == expected


@pytest.mark.parametrize("codec,package", [(Compression.SNAPPY, "python-snappy"), (Compression.LZ4, "lz4"),
                                           (Compression.ZSTD, "zstandard")])
def test_a_batch_in_a_codec_we_lack_gives_a_clear_error(codec, package):
    if getattr(kafka.codec, f"has_{codec.name.lower()}")():
        buf = kafka_python_batch(codec)
        [(_, batch)] = list(iter_batches(buf))
        assert len(batch.records) == 3
        return
    buf = bytearray(encode_batch(0, RECORDS, 5))
    struct.pack_into(">h", buf, ATTRIBUTES_POS, codec)
    with pytest.raises(UnsupportedCompressionError, match=f"{codec.name.lower()}-compressed; install {package}"):
        list(iter_batches(restamp_crc(buf)))


def test_log_append_time_batches_give_every_record_the_max_timestamp():
    buf = bytearray(encode_batch(0, RECORDS, 5))
    struct.pack_into(">h", buf, ATTRIBUTES_POS, 0x08)
    struct.pack_into(">q", buf, 35, 9_999)                # maxTimestamp: the broker's append time
    [(_, batch)] = list(iter_batches(restamp_crc(buf)))
    assert [r.timestamp_ms for r in batch.records] == [9_999, 9_999]


def test_control_batches_are_flagged_and_kafka_python_agrees():
    commit_marker = StoredRecord(10, 5, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")
    batch = StoredBatch(10, 10, (commit_marker,), max_timestamp_ms=5,
                        attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG, producer_id=4_000, producer_epoch=2)
    buf = encode_stored_batch(batch)
    [(_, decoded)] = list(iter_batches(buf))
    assert decoded.is_control and decoded.is_transactional
    assert decoded == batch
    theirs = DefaultRecordBatch(buf)
    assert theirs.is_control_batch and theirs.producer_id == 4_000
    assert [r.commit for r in theirs] == [True]


def test_a_compacted_batch_keeps_its_offsets_and_record_timestamps():
    batch = StoredBatch(100, 109, (StoredRecord(103, 50, b"a", b"1"), StoredRecord(108, 70, b"b", None)),
                        max_timestamp_ms=80)
    [(_, decoded)] = list(iter_batches(encode_stored_batch(batch)))
    assert (decoded.base_offset, decoded.last_offset) == (100, 109)
    assert decoded.records == batch.records
    assert DefaultRecordBatch(encode_stored_batch(batch)).validate_crc()


headers = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=3)
log_records = st.builds(LogRecord, st.binary(max_size=300), st.none() | st.binary(max_size=300),
                        headers.map(tuple))


@given(batches=st.lists(st.lists(log_records, min_size=1, max_size=6), min_size=1, max_size=5),
       first_offset=st.integers(0, 2**62), timestamp=st.integers(0, 2**50))
def test_encode_then_iterate_gives_back_every_record(batches, first_offset, timestamp):
    buf = bytearray()
    offset = first_offset
    for records in batches:
        buf += encode_batch(offset, records, timestamp)
        offset += len(records)
    reader = iter_batches(bytes(buf))
    decoded = [batch for _, batch in reader]
    assert reader.stop is None and reader.end == len(buf)
    assert reader.next_offset == offset
    got = [(r.key, r.value, r.headers) for b in decoded for r in b.records]
    assert got == [(r.key, r.value, r.headers) for records in batches for r in records]
    assert [r.offset for b in decoded for r in b.records] == list(range(first_offset, offset))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varints_are_zigzag_as_kafka_python_reads_them(value):
    out = bytearray()
    encode_varint(value, out)
    assert decode_varint(bytes(out), 0) == (value, len(out))


def test_varint_bytes_for_small_values():
    for value, expected in [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"),
                            (64, b"\x80\x01")]:
        out = bytearray()
        encode_varint(value, out)
        assert bytes(out) == expected


def two_batches() -> tuple[bytes, int]:
    first = encode_batch(0, RECORDS, 1)
    return first + encode_batch(2, RECORDS, 2), len(first)


def stop_of(buf: bytes, min_offset: int = 0):
    reader = BatchReader(buf, 0, min_offset)
    positions = [p for p, _ in reader.headers()]
    return positions, reader.end, reader.stop


def test_stop_reasons_say_where_and_why():
    buf, second = two_batches()
    positions, end, stop = stop_of(buf)
    assert (positions, end, stop) == ([0, second], len(buf), None)

    # The first five bytes of a small base offset are zeros: nothing tells them from a
    # preallocated tail, and they hold nothing.
    for cut, reason in [(second + 5, StopReason.ZERO_FILL), (second + 20, StopReason.SHORT),
                        (len(buf) - 1, StopReason.SHORT)]:
        positions, end, stop = stop_of(buf[:cut])
        assert (positions, end, stop.position, stop.reason) == ([0], second, second, reason)

    for zeros in (bytes(BATCH_HEADER_LEN), bytes(5), bytes(2**20)):
        assert stop_of(buf[:second] + zeros)[2] == ScanStop(second, StopReason.ZERO_FILL,
                                                            f"{len(zeros)} zero bytes to the end")
    # A zero length with anything non-zero after it is no preallocated tail.
    for zeros in (BATCH_HEADER_LEN, 2**16, 2**17 + 3):           # the last byte past a chunk or two
        assert stop_of(buf[:second] + bytes(zeros) + b"\x01")[2].reason is StopReason.BAD_LENGTH
    assert stop_of(buf[:second] + bytes(5) + b"\x01")[2].reason is StopReason.SHORT
    assert sound_batches(buf + bytes(100))[1:] == (2 + len(RECORDS), ScanStop(len(buf), StopReason.ZERO_FILL,
                                                               "100 zero bytes to the end"))

    damaged = bytearray(buf)
    damaged[second + 16] = 1
    assert stop_of(bytes(damaged))[2].reason is StopReason.BAD_MAGIC

    damaged = bytearray(buf)
    damaged[second + 40] ^= 0xFF
    stop = stop_of(bytes(damaged))[2]
    assert stop.reason is StopReason.BAD_CRC and stop.position == second and "computed" in stop.detail

    repeated = buf[:second] + encode_batch(1, RECORDS, 2)      # offset 1 was in the first batch
    stop = stop_of(repeated)[2]
    assert (stop.reason, stop.position) == (StopReason.OFFSETS_NOT_INCREASING, second)
    assert stop_of(buf, min_offset=1)[2].reason is StopReason.OFFSETS_NOT_INCREASING


def test_find_sound_batch_skips_the_damage_and_needs_a_whole_batch():
    buf, second = two_batches()
    damaged = bytearray(buf)
    damaged[10] ^= 0x10
    assert find_sound_batch(bytes(damaged), 0) == second
    assert find_sound_batch(bytes(damaged[:-1]), 0) is None
    assert find_sound_batch(buf, 0, min_offset=3) is None


def test_records_that_do_not_parse_under_a_good_crc_are_a_decode_error():
    buf = bytearray(encode_batch(0, RECORDS, 1))
    struct.pack_into(">i", buf, 57, 3)                       # recordsCount claims one more
    with pytest.raises(BatchDecodeError, match="records end early"):
        list(iter_batches(restamp_crc(buf)))
    buf = bytearray(encode_batch(0, RECORDS, 1)) + b"\x00"
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    with pytest.raises(BatchDecodeError, match="bytes after the last"):
        list(iter_batches(restamp_crc(buf)))


def test_encode_batch_refuses_an_empty_batch():
    with pytest.raises(ValueError):
        encode_batch(0, [], 0)
