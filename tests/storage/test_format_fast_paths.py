"""The fast paths of `storage.format` (phase 2) against independent writers and readers.

- `encode_batch` takes a table-driven path with shared header blocks; its bytes must be
  kafka-python's `DefaultRecordBatchBuilder`'s, byte for byte (kafka-python stamps
  partitionLeaderEpoch 0 where Kafka's coordinator, and we, write -1).
- The decoder parses each distinct header block once per batch; what it returns must be
  what kafka-python's `DefaultRecordBatch` reads from the same bytes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from storage.api import LogRecord, StoredRecord
from storage.format import (
    BatchDecodeError,
    HeaderBlockLengthError,
    decode_header_block,
    encode_batch,
    iter_batches,
)
from tests.support.batch_edits import restamp_crc

header_lists = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=4).map(tuple)
# Sizes on both sides of the varint table (4096) and of one-byte varints (64).
big = st.integers(4090, 4200).map(lambda n: b"x" * n)
payloads = st.none() | st.binary(max_size=100) | big


@st.composite
def batches(draw) -> list[LogRecord]:
    """Records of one batch, many sharing one headers tuple as one commit's records do."""
    shared = draw(header_lists)
    count = draw(st.integers(1, 20))
    out = []
    for _ in range(count):
        key = draw(st.binary(max_size=80) | big)
        headers = shared if draw(st.booleans()) else draw(header_lists)
        out.append(LogRecord(key, draw(payloads), headers))
    return out


def kafka_python_bytes(base_offset: int, records: list[LogRecord], timestamp_ms: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, r in enumerate(records):
        assert builder.append(i, timestamp=timestamp_ms, key=r.key, value=r.value, headers=list(r.headers))
    buf = bytearray(builder.build())
    struct.pack_into(">qi", buf, 0, base_offset, struct.unpack_from(">i", buf, 8)[0])
    struct.pack_into(">i", buf, 12, -1)             # partitionLeaderEpoch, outside the CRC
    return restamp_crc(buf)


@settings(max_examples=60, deadline=None)
@given(records=batches(), base_offset=st.integers(0, 2**40), timestamp_ms=st.integers(0, 2**45))
def test_encode_batch_is_kafka_pythons_bytes(records, base_offset, timestamp_ms):
    assert encode_batch(base_offset, records, timestamp_ms) == kafka_python_bytes(base_offset, records, timestamp_ms)


@settings(max_examples=60, deadline=None)
@given(records=batches(), base_offset=st.integers(0, 2**40), timestamp_ms=st.integers(0, 2**45))
def test_decoded_records_are_what_kafka_python_reads(records, base_offset, timestamp_ms):
    buf = kafka_python_bytes(base_offset, records, timestamp_ms)
    [(_, ours)] = list(iter_batches(buf))
    theirs = [StoredRecord(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in DefaultRecordBatch(buf)]
    assert list(ours.records) == theirs


def test_records_with_the_same_header_bytes_share_one_decoded_tuple():
    shared = (("member_id", b"m-1"), ("generation", b"3"))
    records = [LogRecord(b"k%d" % i, b"v", shared) for i in range(3)] + [LogRecord(b"k", b"v", (("member_id", b"m-2"),))]
    [(_, batch)] = list(iter_batches(encode_batch(0, records, 5)))
    first, second, third, other = batch.records
    assert first.headers == shared and first.headers is second.headers is third.headers
    assert other.headers == (("member_id", b"m-2"),)


def test_a_header_block_that_runs_past_its_record_is_refused_even_when_seen_before():
    # Two records with the same header block; the second claims one byte more than it
    # has. The shared block must not let the decoder skip the length check.
    records = [LogRecord(b"a", b"v", (("h", b"x"),)), LogRecord(b"b", b"v", (("h", b"x"),))]
    buf = bytearray(encode_batch(0, records, 5))
    second = buf.rindex(b"\x00\x00\x02\x02b")           # length varint just before: attributes, ts, delta 1
    buf[second - 1] += 2                                # zig-zag: one more byte
    try:
        list(iter_batches(restamp_crc(buf)))
    except BatchDecodeError as e:
        assert "record" in str(e)
    else:
        raise AssertionError("a record longer than its batch was decoded")


def test_a_batch_past_the_varint_table_is_kafka_pythons_bytes():
    # offset deltas of 4,096 and more (an OffsetCommit of thousands of partitions)
    shared = (("member_id", b"m"), ("client_host", None))
    records = [LogRecord(b"k%d" % i, b"v" * (i % 7), shared) for i in range(5_000)]
    assert encode_batch(7, records, 1_000) == kafka_python_bytes(7, records, 1_000)


# `decode_header_block`: one record's header bytes on their own (what the offline
# columnar scanner hands it, one distinct block at a time), against kafka-python's
# reading of the same headers inside a batch.

def zigzag(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if v < 0x80:
            return bytes(out + bytes([v]))
        out.append((v & 0x7F) | 0x80)
        v >>= 7


def header_block(headers) -> bytes:
    out = [zigzag(len(headers))]
    for name, value in headers:
        raw = name.encode()
        out += [zigzag(len(raw)), raw, zigzag(-1) if value is None else zigzag(len(value)) + value]
    return b"".join(out)


@given(headers=header_lists)
def test_a_header_block_decodes_as_kafka_python_reads_the_record(headers):
    block = header_block(headers)
    buf = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                    producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    buf.append(0, timestamp=1, key=b"k", value=b"v", headers=list(headers))
    (record,) = list(DefaultRecordBatch(bytes(buf.build())))
    assert decode_header_block(block) == tuple(record.headers) == headers


@given(headers=header_lists, cut=st.integers(1, 8), extra=st.binary(min_size=1, max_size=3))
def test_a_header_block_that_does_not_end_with_its_headers_is_refused(headers, cut, extra):
    block = header_block(headers)
    with pytest.raises(HeaderBlockLengthError):
        decode_header_block(block + extra)
    if headers:
        with pytest.raises(ValueError):
            decode_header_block(block[:max(len(block) - cut, 0)])


def test_a_header_name_that_is_not_utf8_is_refused():
    with pytest.raises(UnicodeDecodeError):
        decode_header_block(zigzag(1) + zigzag(1) + b"\xff" + zigzag(-1))


def test_a_header_name_of_negative_length_is_refused():
    with pytest.raises(ValueError, match="negative length -1"):
        decode_header_block(zigzag(1) + zigzag(-1) + zigzag(-1))
