"""The on-disk format: Kafka RecordBatch v2, exactly as Kafka writes `__consumer_offsets`.

A segment file is a plain concatenation of batches, nothing else: no file header, no
index, no trailer. Every integer below is big-endian; `varint` is a zig-zag base-128
varint (protobuf `sint32`/`sint64`), so -1 is one byte `0x01`.

Batch header (BATCH_HEADER, 61 bytes)::

    pos size field                 what we write / how we read it
      0   8  baseOffset   int64    offset of the first record
      8   4  batchLength  int32    bytes after this field (so a batch is 12 + batchLength)
     12   4  partitionLeaderEpoch  -1; not covered by the CRC so a leader can stamp it
     16   1  magic        int8     2 (0 and 1 are the legacy message sets: refused)
     17   4  crc          uint32   CRC-32C (Castagnoli) of bytes 21 .. end of batch
     21   2  attributes   int16    bits 0-2 compression (0 none, 1 gzip, 2 snappy,
                                   3 lz4, 4 zstd); bit 3 timestamp type (0 CREATE_TIME,
                                   1 LOG_APPEND_TIME); bit 4 transactional; bit 5
                                   control; bit 6 delete horizon set. We write 0.
     23   4  lastOffsetDelta int32 last record's offset - baseOffset
     27   8  baseTimestamp int64   first timestamp (ours: the append's timestamp_ms)
     35   8  maxTimestamp  int64   largest record timestamp
     43   8  producerId   int64    -1 (not idempotent, not transactional)
     51   2  producerEpoch int16   -1
     53   4  baseSequence int32    -1
     57   4  recordsCount int32    number of records that follow
     61      records (compressed as one block when attributes say so)

Record (each field a varint unless noted)::

    length          bytes of the record after this varint
    attributes      int8, unused, 0
    timestampDelta  varlong: timestamp - baseTimestamp
    offsetDelta     offset - baseOffset
    keyLength       -1 = null key
    key             keyLength bytes
    valueLength     -1 = null value: a tombstone
    value           valueLength bytes
    headerCount
    headers         per header: keyLength, key (UTF-8), valueLength (-1 = null), value

Our records carry audit headers (member id, generation, client); Kafka's coordinator
ignores headers in `__consumer_offsets`, so real Kafka tools read our segments.

Reading walks a buffer batch by batch, checking framing (length, magic, CRC, offsets
increasing) and stopping at the first batch that fails, with where and why
(`BatchReader.stop`): recovery tells a torn tail from damage in the middle with that,
and the offline audit reports it. Reading needs no file, so the service and the
offline job share this one parser. A checked batch decodes whole (`decode_batch`), or,
for loading, to the offset, key and value of each record only (`record_fields`).
"""

from __future__ import annotations

import enum
import functools
import gzip
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import kafka.codec as kafka_codec
from crc32c import crc32c

from storage.api import LogRecord, RecordFields, StoredBatch, StoredRecord, TxnBatch

# baseOffset, batchLength: the part of a batch that every log format shares.
LOG_OVERHEAD = ">qi"
LOG_OVERHEAD_LEN = 12
assert struct.calcsize(LOG_OVERHEAD) == LOG_OVERHEAD_LEN

BATCH_HEADER = ">qiibIhiqqqhii"
BATCH_HEADER_LEN = 61
assert struct.calcsize(BATCH_HEADER) == BATCH_HEADER_LEN

MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21          # the CRC covers attributes .. end of batch
# batchLength counts everything after itself, so the smallest legal value is the rest
# of the header with no records.
MIN_BATCH_LENGTH = BATCH_HEADER_LEN - LOG_OVERHEAD_LEN
MAGIC = 2

NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

_header = struct.Struct(BATCH_HEADER)
_overhead = struct.Struct(LOG_OVERHEAD)
_crc = struct.Struct(">I")
assert struct.calcsize(">qii") == MAGIC_POS
assert struct.calcsize(">qiib") == CRC_POS
assert struct.calcsize(">qiibI") == ATTRIBUTES_POS


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class StopReason(enum.Enum):
    SHORT = "short batch"                        # fewer bytes than the header or batchLength needs
    BAD_LENGTH = "bad batch length"              # batchLength smaller than a header
    BAD_MAGIC = "bad magic"
    BAD_CRC = "bad CRC"
    OFFSETS_NOT_INCREASING = "offsets not increasing"
    # Nothing but zeros from here to the end: an active segment's preallocated tail, never
    # written (storage.partition_log), so the end of its log; in a closed segment, damage.
    ZERO_FILL = "zero fill"


@dataclass(frozen=True, slots=True)
class ScanStop:
    position: int
    reason: StopReason
    detail: str

    def __str__(self) -> str:
        return f"{self.reason.value} at byte {self.position}: {self.detail}"


class BatchDecodeError(ValueError):
    """A batch passed its CRC but its records do not parse: a writer bug, not a torn write."""

    def __init__(self, position: int, detail: str):
        super().__init__(f"batch at byte {position}: {detail}")
        self.position = position
        self.detail = detail


class UnsupportedCompressionError(BatchDecodeError):
    pass


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD_LEN + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


# -- encoding ---------------------------------------------------------------------------


def encode_varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)   # zig-zag; Python ints are unbounded, so this is exact
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


# Offset deltas, key and value lengths and record lengths are nearly always small:
# a table lookup instead of a loop of appends.
_SMALL_VARINTS = tuple(_varint_bytes(n) for n in range(4096))


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        out.append(1)                  # varint(-1)
    else:
        encode_varint(len(data), out)
        out += data


@functools.lru_cache(maxsize=4096)
def _encode_headers(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    """A record's header count and headers, as the record ends with them. Cached: a
    client's commits carry the same audit headers, commit after commit."""
    out = bytearray()
    encode_varint(len(headers), out)
    for name, header_value in headers:
        _encode_bytes(name.encode(), out)
        _encode_bytes(header_value, out)
    return bytes(out)


def _encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                   value: bytes | None, headers: tuple[tuple[str, bytes | None], ...],
                   out: bytearray) -> None:
    body = bytearray(b"\x00")          # attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    body += _encode_headers(headers)
    encode_varint(len(body), out)
    out += body


def _frame(base_offset: int, last_offset_delta: int, base_timestamp: int, max_timestamp: int,
           records_count: int, records: bytes | bytearray, *, attributes: int = 0,
           producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
           base_sequence: int = NO_SEQUENCE) -> bytes:
    out = bytearray(BATCH_HEADER_LEN)
    out += records
    _header.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD_LEN, NO_PARTITION_LEADER_EPOCH,
                      MAGIC, 0, attributes, last_offset_delta, base_timestamp, max_timestamp,
                      producer_id, producer_epoch, base_sequence, records_count)
    _crc.pack_into(out, CRC_POS, crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)


def encode_batch(base_offset: int, records: Sequence[LogRecord], timestamp_ms: int,
                 txn: TxnBatch | None = None) -> bytes:
    """One uncompressed CREATE_TIME batch; record i gets offset base_offset + i. A `txn`
    batch carries its producer and the transactional bit; a marker is one control record."""
    if txn is not None:
        return encode_producer_batch(base_offset, records, timestamp_ms, txn)
    if not records:
        raise ValueError("a batch holds at least one record")
    return frame_records(base_offset, len(records), timestamp_ms, encode_records(records, 0))


def control_record(control: int, coordinator_epoch: int = 0) -> LogRecord:
    """Kafka's EndTransactionMarker: key (version 0, type), value (version 0, coordinator epoch)."""
    return LogRecord(struct.pack(">hh", 0, control), struct.pack(">hi", 0, coordinator_epoch))


def control_type(key: bytes | None) -> int | None:
    """The ControlRecordType of a control record's key (None if it is not one we read)."""
    if key is None or len(key) < 4:
        return None
    return struct.unpack_from(">h", key, 2)[0]


def encode_producer_batch(base_offset: int, records: Sequence[LogRecord], timestamp_ms: int, txn: TxnBatch,
                          base_sequence: int = NO_SEQUENCE) -> bytes:
    """A transactional batch of `txn`'s producer (or its control batch), as Kafka writes one."""
    attributes = TRANSACTIONAL_FLAG
    if txn.control is not None:
        if records:
            raise ValueError("a control batch holds only its marker")
        records = (control_record(txn.control),)
        attributes |= CONTROL_FLAG
    if not records:
        raise ValueError("a batch holds at least one record")
    return _frame(base_offset, len(records) - 1, timestamp_ms, timestamp_ms, len(records),
                  encode_records(records, 0), attributes=attributes, producer_id=txn.producer_id,
                  producer_epoch=txn.producer_epoch, base_sequence=base_sequence)


def frame_records(base_offset: int, count: int, timestamp_ms: int, body: bytes | bytearray) -> bytes:
    """The batch of `count` records whose encoding (`encode_records`, from delta 0) is `body`."""
    return _frame(base_offset, count - 1, timestamp_ms, timestamp_ms, count, body)


def encode_records(records: Sequence[LogRecord], first_delta: int) -> bytes:
    """`_encode_record` for each record at timestamp delta 0, offset deltas from
    `first_delta`: the commit path's hot loop, and a slice of a large batch's body (the
    body of a batch is its slices' bodies joined). A run of records holding the same
    headers tuple (one commit's audit headers) encodes it once."""
    small = _SMALL_VARINTS
    limit = len(small)
    parts: list[bytes | bytearray] = []
    last_headers: object = None
    header_block = b""
    for delta, record in enumerate(records, first_delta):
        key, value, headers = record.key, record.value, record.headers
        if headers is not last_headers:
            header_block = _encode_headers(headers)
            last_headers = headers
        offset_delta = small[delta] if delta < limit else _varint_bytes(delta)
        if key is None or value is None or len(key) >= limit or len(value) >= limit:
            body = bytearray(b"\x00\x00")       # attributes, timestamp delta 0
            body += offset_delta
            _encode_bytes(key, body)
            _encode_bytes(value, body)
            body += header_block
            length = len(body)
            parts.append(small[length] if length < limit else _varint_bytes(length))
            parts.append(body)
            continue
        packed = b"".join((b"\x00\x00", offset_delta, small[len(key)], key, small[len(value)], value, header_block))
        length = len(packed)
        parts.append(small[length] if length < limit else _varint_bytes(length))
        parts.append(packed)
    return b"".join(parts)


def encode_stored_batch(batch: StoredBatch) -> bytes:
    """Re-encode a decoded batch uncompressed, keeping its offsets (first, last, every
    record's) and producer fields: what compaction writes back."""
    timestamps = [r.timestamp_ms for r in batch.records]
    base_timestamp = min(timestamps, default=batch.max_timestamp_ms)
    body = bytearray()
    for record in batch.records:
        _encode_record(record.offset - batch.base_offset, record.timestamp_ms - base_timestamp,
                       record.key, record.value, record.headers, body)
    # Compression is dropped and timestamps are the records' own, so the batch is
    # CREATE_TIME; Kafka's delete-horizon stamping is not ours (see compaction.py).
    attributes = batch.attributes & (TRANSACTIONAL_FLAG | CONTROL_FLAG)
    return _frame(batch.base_offset, batch.last_offset - batch.base_offset, base_timestamp,
                  max(timestamps, default=batch.max_timestamp_ms), len(batch.records), body,
                  attributes=attributes, producer_id=batch.producer_id,
                  producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence)


# -- decoding ---------------------------------------------------------------------------


def _varint_slow(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


# Codecs other than gzip come from kafka-python's optional packages: (package to
# install, kafka.codec probe, kafka.codec decoder).
_OPTIONAL_CODECS: dict[int, tuple[str, str, str]] = {
    Compression.SNAPPY: ("python-snappy", "has_snappy", "snappy_decode"),
    Compression.LZ4: ("lz4", "has_lz4", "lz4_decode"),
    Compression.ZSTD: ("zstandard", "has_zstd", "zstd_decode"),
}


def _decompress(codec: int, data: bytes, position: int) -> bytes:
    if codec == Compression.GZIP:
        return gzip.decompress(data)
    if codec not in _OPTIONAL_CODECS:
        raise UnsupportedCompressionError(position, f"unknown compression type {codec}")
    package, probe, decoder = _OPTIONAL_CODECS[codec]
    if not getattr(kafka_codec, probe)():
        raise UnsupportedCompressionError(
            position, f"batch is {Compression(codec).name.lower()}-compressed; install {package} to read it")
    return getattr(kafka_codec, decoder)(data)


def _decode_headers(data: bytes, pos: int, names: dict[bytes, str]) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """A record's header count and headers from `pos`; the position after them."""
    b = data[pos]
    if b < 0x80:
        header_count = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        header_count, pos = _varint_slow(data, pos)
    if not header_count:
        return (), pos
    items = []
    for _h in range(header_count):
        b = data[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = _varint_slow(data, pos)
        if n < 0:
            # Checked, not left to the slice: it would read b"" and step `pos` backwards.
            raise ValueError(f"a header name of negative length {n}")
        raw_name = data[pos:pos + n]
        name = names.get(raw_name)
        if name is None:
            name = names[raw_name] = raw_name.decode()
        pos += n
        b = data[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = _varint_slow(data, pos)
        if n < 0:
            header_value = None
        else:
            header_value = data[pos:pos + n]
            pos += n
        items.append((name, header_value))
    return tuple(items), pos


class HeaderBlockLengthError(ValueError):
    """A record's header bytes do not end where its headers do."""


def decode_header_block(raw: bytes, names: dict[bytes, str] | None = None) -> tuple[tuple[str, bytes | None], ...]:
    """The headers of a record from its header bytes (the count, then the headers, up to
    the record's end), which must hold exactly them. Raises ValueError (a name that is not
    UTF-8, a varint too long) or HeaderBlockLengthError (a subclass) if they do not decode."""
    try:
        headers, pos = _decode_headers(raw, 0, {} if names is None else names)
    except IndexError:
        pos = -1
    if pos != len(raw):
        raise HeaderBlockLengthError(f"{len(raw)} header bytes, headers end at {pos}")
    return headers


# One record's framing, as `_walk_records` reads it: (timestamp delta, offset delta, key,
# value, where its headers start, where it ends).
_Span = tuple[int, int, bytes | None, bytes | None, int, int]


def _walk_records(data: bytes, count: int, position: int) -> list[_Span]:
    """The framing of `count` records in `data`, checked against each record's length;
    the hot loop of loading, so varints of one byte (nearly all of them) are read inline
    and only longer ones take the slow path. Headers are stepped over, not parsed."""
    spans: list[_Span] = []
    append = spans.append
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                # A record of 64..8191 bytes (ours, with audit headers): a 2-byte length.
                v = (b & 0x7F) | (data[pos + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, pos = _varint_slow(data, pos)
            record_end = pos + length
            pos += 1                                   # record attributes, unused
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = _varint_slow(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = _varint_slow(data, pos)
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = _varint_slow(data, pos)
            if n < 0:
                key = None
            else:
                key = data[pos:pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = _varint_slow(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos:pos + n]
                pos += n
            if pos > record_end or record_end > end:
                raise BatchDecodeError(position, f"record at offset delta {offset_delta} has a wrong length")
            append((ts_delta, offset_delta, key, value, pos, record_end))
            pos = record_end
    except BatchDecodeError:
        raise
    except IndexError:
        raise BatchDecodeError(position, f"records end early ({len(spans)} of {count})") from None
    except ValueError as e:          # a varint longer than 10 bytes
        raise BatchDecodeError(position, f"undecodable record: {e}") from None
    if pos != end:
        raise BatchDecodeError(position, f"{end - pos} bytes after the last of {count} records")
    return spans


def _decode_records(data: bytes, count: int, header: BatchHeader, position: int) -> tuple[StoredRecord, ...]:
    """Decode `count` records from `data`, headers included."""
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append_time = header.attributes & TIMESTAMP_TYPE_MASK
    records = []
    names: dict[bytes, str] = {}     # a batch repeats the same few header names
    header_blocks: dict[bytes, tuple[tuple[str, bytes | None], ...]] = {}
    new_record = tuple.__new__       # skips the NamedTuple's Python-level __new__
    for ts_delta, offset_delta, key, value, headers_pos, record_end in _walk_records(data, count, position):
        # One commit's records carry the same header block (member, generation,
        # client): parse each distinct block once per batch, share the tuple.
        raw_headers = data[headers_pos:record_end]
        headers = header_blocks.get(raw_headers)
        if headers is None:
            try:
                headers = decode_header_block(raw_headers, names)
            except HeaderBlockLengthError:
                raise BatchDecodeError(position, f"record at offset delta {offset_delta} has a wrong length") from None
            except ValueError as e:  # a bad header name (UnicodeDecodeError) or varint
                raise BatchDecodeError(position, f"undecodable record: {e}") from None
            header_blocks[raw_headers] = headers
        records.append(new_record(StoredRecord, (
            base_offset + offset_delta,
            header.max_timestamp if log_append_time else base_ts + ts_delta,
            key, value, headers)))
    return tuple(records)


def _records_data(buf: Any, position: int, header: BatchHeader) -> bytes:
    """The records of a batch whose framing `BatchReader` has checked, as one buffer,
    decompressed."""
    data = bytes(buf[position + BATCH_HEADER_LEN:position + header.size])
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        try:
            data = _decompress(codec, data, position)
        except BatchDecodeError:
            raise
        except Exception as e:
            raise BatchDecodeError(position, f"cannot decompress: {e}") from None
    return data


def decode_batch(buf: Any, position: int, header: BatchHeader) -> StoredBatch:
    """The records of a batch whose framing `BatchReader` has checked."""
    records = _decode_records(_records_data(buf, position, header), header.records_count, header, position)
    return StoredBatch(header.base_offset, header.last_offset, records,
                       max_timestamp_ms=header.max_timestamp, attributes=header.attributes,
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       base_sequence=header.base_sequence)


def record_fields(buf: Any, position: int, header: BatchHeader) -> list[RecordFields]:
    """`(offset, key, value)` of each record of a batch whose framing `BatchReader` has
    checked: what loading needs. Timestamps and headers are stepped over (headers by the
    record length, unparsed) and no `StoredRecord` is built."""
    base_offset = header.base_offset
    return [(base_offset + offset_delta, key, value) for _ts, offset_delta, key, value, _h, _e
            in _walk_records(_records_data(buf, position, header), header.records_count, position)]


def _check(buf: Any, position: int, size: int, min_offset: int) -> BatchHeader | ScanStop:
    """The header of the batch at `position` if its framing is sound, else why not."""
    remaining = size - position
    if remaining < LOG_OVERHEAD_LEN:
        if zero_filled(buf, position, size):
            return ScanStop(position, StopReason.ZERO_FILL, f"{remaining} zero bytes to the end")
        return ScanStop(position, StopReason.SHORT, f"{remaining} bytes, less than a batch header")
    base_offset, batch_length = _overhead.unpack_from(buf, position)
    if batch_length < MIN_BATCH_LENGTH:
        if batch_length == 0 and zero_filled(buf, position, size):
            return ScanStop(position, StopReason.ZERO_FILL, f"{remaining} zero bytes to the end")
        return ScanStop(position, StopReason.BAD_LENGTH, f"batchLength {batch_length}")
    if remaining > MAGIC_POS and buf[position + MAGIC_POS] != MAGIC:
        return ScanStop(position, StopReason.BAD_MAGIC, f"magic {buf[position + MAGIC_POS]}, expected {MAGIC}")
    if remaining < LOG_OVERHEAD_LEN + batch_length:
        return ScanStop(position, StopReason.SHORT,
                        f"{remaining} bytes left of a {LOG_OVERHEAD_LEN + batch_length}-byte batch")
    header = BatchHeader(*_header.unpack_from(buf, position))
    end = position + header.size
    actual = crc32c(memoryview(buf)[position + ATTRIBUTES_POS:end])
    if actual != header.crc:
        return ScanStop(position, StopReason.BAD_CRC, f"stored {header.crc:#010x}, computed {actual:#010x}")
    if header.base_offset < min_offset or header.last_offset_delta < 0:
        return ScanStop(position, StopReason.OFFSETS_NOT_INCREASING,
                        f"batch {header.base_offset}..{header.last_offset} after offset {min_offset - 1}")
    return header


def data_end(buf: Any, start: int = 0) -> int:
    """The position just past the last byte that is not zero, or `start` if there is none
    from `start` on."""
    return start + len(bytes(buf[start:]).rstrip(b"\x00"))


_ZERO_CHUNK = 2**16


def zero_filled(buf: Any, start: int, size: int) -> bool:
    """Whether every byte of `buf[start:size]` is zero: read a chunk at a time, so that a
    scan stopping in damage early in a large segment does not copy the rest of it."""
    for at in range(start, size, _ZERO_CHUNK):
        chunk = bytes(buf[at:min(at + _ZERO_CHUNK, size)])
        if chunk.count(0) != len(chunk):
            return False
    return True


_FRAMING = struct.Struct(">qiibIhi")   # baseOffset .. lastOffsetDelta: what framing checks


def batch_header(buf: Any, position: int) -> BatchHeader:
    return BatchHeader(*_header.unpack_from(buf, position))


def sound_batches(buf: Any, start: int = 0, min_offset: int = 0) -> tuple[list[int], int, ScanStop | None]:
    """The positions of the sound batches from `start`, the offset after the last of
    them, and why the walk stopped (None: at the end of the buffer): what `BatchReader`
    walks, with the same rules, without building a header per batch. The offline
    scanner frames whole files with it; the stop comes from `_check` itself."""
    size = len(buf)
    view = memoryview(buf)
    unpack = _FRAMING.unpack_from
    positions: list[int] = []
    append = positions.append
    position = start
    next_offset = min_offset
    while position < size:
        if size - position >= _FRAMING.size:
            base_offset, length, _epoch, magic, crc, _attributes, last_delta = unpack(buf, position)
            end = position + LOG_OVERHEAD_LEN + length
            if (length >= MIN_BATCH_LENGTH and magic == MAGIC and end <= size and base_offset >= next_offset
                    and last_delta >= 0 and crc32c(view[position + ATTRIBUTES_POS:end]) == crc):
                append(position)
                next_offset = base_offset + last_delta + 1
                position = end
                continue
        stop = _check(buf, position, size, next_offset)
        assert isinstance(stop, ScanStop), "framing rules disagree with _check"
        return positions, next_offset, stop
    return positions, next_offset, None


class BatchReader:
    """Walks the whole, sound batches of `buf` from `start`.

    Iterating yields `(position, StoredBatch)`; `headers()` yields `(position,
    BatchHeader)` without decoding records (the scan recovery does). Afterwards `end`
    is the position just past the last sound batch and `stop` says why the walk ended
    before the end of the buffer (None: it reached it). Offsets must increase: a batch
    starting below `min_offset` (or below the previous batch's last offset + 1) stops
    the walk.
    """

    def __init__(self, buf: Any, start: int = 0, min_offset: int = 0):
        self._buf = buf
        self._size = len(buf)
        self.end = start
        self.next_offset = min_offset
        self.stop: ScanStop | None = None

    def headers(self) -> Iterator[tuple[int, BatchHeader]]:
        buf, size = self._buf, self._size
        while self.end < size:
            found = _check(buf, self.end, size, self.next_offset)
            if isinstance(found, ScanStop):
                self.stop = found
                return
            position = self.end
            self.end += found.size
            self.next_offset = found.last_offset + 1
            yield position, found

    def scan(self) -> BatchReader:
        """Walk to the stop without decoding records; `end`, `next_offset` and `stop`
        then describe the buffer."""
        for _ in self.headers():
            pass
        return self

    def __iter__(self) -> Iterator[tuple[int, StoredBatch]]:
        for position, header in self.headers():
            yield position, decode_batch(self._buf, position, header)


def iter_batches(buf: Any, start: int = 0, min_offset: int = 0) -> BatchReader:
    return BatchReader(buf, start, min_offset)


# What an interrupted append leaves: a prefix of a batch (short), zeros where the file
# grew but the data never landed (length 0), or a batch whose pages did not all reach
# the disk (CRC). A whole batch with a bad magic or offsets going back is no tear.
TORN_WRITE_REASONS = frozenset({StopReason.SHORT, StopReason.BAD_LENGTH, StopReason.BAD_CRC})


class Tail(enum.Enum):
    END = "end of log"          # an active segment's preallocated zeros: nothing was written
    TORN = "torn write"         # an append that never finished: recovery cuts it, keeping the bytes
    DAMAGE = "damage"           # anything else: named, never cut


@dataclass(frozen=True, slots=True)
class TailJudgement:
    verdict: Tail
    sound_at: int | None    # the first sound batch after the stop, if any
    end: int                # one past the last byte the stopped write left

    def describe(self, stop: ScanStop) -> str:
        after = f"; a sound batch follows at byte {self.sound_at}" if self.sound_at is not None else ""
        return f"{stop}{after}"


def judge_tail(buf: Any, stop: ScanStop, next_offset: int, active: bool) -> TailJudgement:
    """What the bytes where a segment's walk stopped are: the one rule recovery
    (`storage.partition_log`), `kgc inspect` and the audit's scanner share, so a tail that
    `kgc serve` cuts as a torn write is never reported as damage, and damage is never cut.

    Only the active segment can hold a write in progress, and only at its very end: a
    sound batch after the stop means the stop is in the middle of the log."""
    if stop.reason is StopReason.ZERO_FILL and active:
        return TailJudgement(Tail.END, None, stop.position)
    sound = find_sound_batch(buf, stop.position, next_offset)
    torn = active and sound is None and stop.reason in TORN_WRITE_REASONS
    # Zeros after the write (the preallocated tail, or a file that grew first) are no part of it.
    return TailJudgement(Tail.TORN if torn else Tail.DAMAGE, sound, data_end(buf, stop.position))


def find_sound_batch(buf: Any, start: int, min_offset: int = 0) -> int | None:
    """The first position after `start` where a sound batch begins, if any.

    Recovery asks this after a walk stops: nothing sound after the stop means a torn
    tail, anything sound means damage in the middle. A candidate must have magic 2 in
    place, a length that fits, offsets not below `min_offset` and a matching CRC, so
    bytes inside a torn batch are not taken for a batch.
    """
    if isinstance(buf, memoryview):
        buf = bytes(buf)
    size = len(buf)
    magic = bytes([MAGIC])
    search_from = start + 1 + MAGIC_POS
    while True:
        found = buf.find(magic, search_from)
        if found < 0:
            return None
        candidate = found - MAGIC_POS
        search_from = found + 1
        if size - candidate < BATCH_HEADER_LEN:
            return None
        if not isinstance(_check(buf, candidate, size, min_offset), ScanStop):
            return candidate
