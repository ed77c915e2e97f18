"""The struct fast paths of `coordinator.records.codec` (OffsetCommit key type 1, value v3 and
the loader's key memo) against a plain reference reading of the same layout."""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator import records
from coordinator.records import OffsetCommitKey, OffsetCommitValue, RecordDecodeError, codec
from storage.api import LogRecord

names = st.text(max_size=30)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


def string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def reference_key(buf: bytes) -> OffsetCommitKey:
    """Key type 1 read field by field; raises on anything that does not fit exactly."""
    (kind, n) = struct.unpack_from(">hh", buf)
    assert kind == 1 and n >= 0
    group = buf[4:4 + n].decode()
    (m,) = struct.unpack_from(">h", buf, 4 + n)
    assert m >= 0
    topic = buf[6 + n:6 + n + m].decode()
    (partition,) = struct.unpack_from(">i", buf, 6 + n + m)
    assert 10 + n + m == len(buf)
    return OffsetCommitKey(group, topic, partition)


def reference_value(buf: bytes) -> OffsetCommitValue:
    version, offset, epoch, n = struct.unpack_from(">hqih", buf)
    assert version == 3 and n >= 0
    metadata = buf[16:16 + n].decode()
    (ts,) = struct.unpack_from(">q", buf, 16 + n)
    assert 24 + n == len(buf)
    return OffsetCommitValue(offset, epoch, metadata, ts)


def kafka_v4(offset: int, epoch: int, metadata: str, ts: int, topic_id) -> bytes:
    """OffsetCommitValue v4 as Kafka's schema lays it out (OffsetCommitValue.json, 4.4):
    flexible, so a compact string (length + 1 as an unsigned varint), and the tagged
    fields: topicId, tag 0, a uuid, written only when not the zero uuid."""
    raw = metadata.encode()
    n, length = len(raw) + 1, b""
    while n >= 0x80:
        length += bytes([n & 0x7F | 0x80])
        n >>= 7
    length += bytes([n])
    tags = b"\x00" if topic_id is None else b"\x01\x00\x10" + topic_id.bytes
    return struct.pack(">hqi", 4, offset, epoch) + length + raw + struct.pack(">q", ts) + tags


@given(offset=int64, epoch=int32, metadata=names, ts=int64, topic_id=st.uuids().filter(lambda u: u.int != 0))
def test_offset_commit_values_with_a_topic_id_round_trip_in_kafkas_v4_layout(offset, epoch, metadata, ts, topic_id):
    value = OffsetCommitValue(offset, epoch, metadata, ts, -1, topic_id)
    encoded = records.serialize_value(value)
    assert encoded == kafka_v4(offset, epoch, metadata, ts, topic_id)
    assert records.deserialize_value(OffsetCommitKey("g", "t", 0), encoded) == value
    # Kafka 4.1+ writes v4 without an id too (a commit naming its topic): no id read.
    assert records.deserialize_value(OffsetCommitKey("g", "t", 0), kafka_v4(offset, epoch, metadata, ts, None)) \
        == value._replace(topic_id=None)


@given(group=names, topic=names, partition=int32)
def test_offset_commit_keys_round_trip_in_the_reference_layout(group, topic, partition):
    key = OffsetCommitKey(group, topic, partition)
    encoded = records.serialize_key(key)
    assert encoded == struct.pack(">h", 1) + string(group) + string(topic) + struct.pack(">i", partition)
    assert records.deserialize_key(encoded) == key


@given(offset=int64, epoch=int32, metadata=names, ts=int64)
def test_offset_commit_values_round_trip_in_the_reference_layout(offset, epoch, metadata, ts):
    value = OffsetCommitValue(offset, epoch, metadata, ts)
    encoded = records.serialize_value(value)
    assert encoded == struct.pack(">hqi", 3, offset, epoch) + string(metadata) + struct.pack(">q", ts)
    assert records.deserialize_value(OffsetCommitKey("g", "t", 0), encoded) == value


@st.composite
def damaged(draw, valid: bytes) -> bytes:
    """`valid` cut short, extended, or with one byte changed."""
    buf = bytearray(valid)
    how = draw(st.sampled_from(["cut", "extend", "flip"]))
    if how == "cut":
        return bytes(buf[:draw(st.integers(0, len(buf) - 1))])
    if how == "extend":
        return bytes(buf) + draw(st.binary(min_size=1, max_size=4))
    i = draw(st.integers(0, len(buf) - 1))
    buf[i] = draw(st.integers(0, 255))
    return bytes(buf)


def outcome(decode, reference, buf):
    try:
        expected = reference(buf)
    except Exception:
        expected = None
    try:
        got = decode(buf)
    except RecordDecodeError:
        got = None
    return got, expected


@settings(max_examples=300)
@given(data=st.data(), group=names, topic=names, partition=int32)
def test_damaged_keys_decode_as_the_reference_reads_them_or_are_refused(data, group, topic, partition):
    buf = data.draw(damaged(records.serialize_key(OffsetCommitKey(group, topic, partition))))
    got, expected = outcome(records.deserialize_key, reference_key, buf)
    if expected is not None:
        assert got == expected
    elif buf[:2] == b"\x00\x01":
        assert got is None                    # refused, not misread


@settings(max_examples=300)
@given(data=st.data(), offset=int64, epoch=int32, metadata=names, ts=int64)
def test_damaged_values_decode_as_the_reference_reads_them_or_are_refused(data, offset, epoch, metadata, ts):
    buf = data.draw(damaged(records.serialize_value(OffsetCommitValue(offset, epoch, metadata, ts))))
    got, expected = outcome(lambda b: records.deserialize_value(OffsetCommitKey("g", "t", 0), b),
                            reference_value, buf)
    if expected is not None:
        assert got == expected
    elif buf[:2] == b"\x00\x03":
        assert got is None


def cursor_offset_value(buf: bytes) -> OffsetCommitValue:
    """The cursor's reading (`_Reader`), which the struct fast paths must agree with."""
    r = codec._Reader(buf)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordDecodeError(f"unknown value version {version}")
    r.flexible = version >= 4
    value = codec._decode_offset_commit_value(r, version)
    r.done()
    return value


@settings(max_examples=300)
@given(data=st.data(), offset=int64, epoch=int32, metadata=names, ts=int64,
       topic_id=st.none() | st.uuids())
def test_v4_values_intact_or_damaged_decode_as_the_cursor_reads_them_or_are_refused(data, offset, epoch, metadata,
                                                                                      ts, topic_id):
    valid = kafka_v4(offset, epoch, metadata, ts, topic_id)
    buf = data.draw(st.just(valid) | damaged(valid))
    got, expected = outcome(lambda b: records.deserialize_value(OffsetCommitKey("g", "t", 0), b), cursor_offset_value,
                            buf)
    assert got == expected
    plain = codec._plain_offset_commit_value(buf)
    assert plain is None or plain == expected
    if buf == valid and len(metadata.encode()) < 127:
        assert plain == OffsetCommitValue(offset, epoch, metadata, ts, -1, topic_id if topic_id and topic_id.int
                                          else None)     # read by the fast path


def test_the_audit_headers_of_one_commit_are_one_shared_tuple():
    value = OffsetCommitValue(1, -1, "", 5)
    a, b = (records.new_offset_commit_record("g", "t", p, value, member_id="m", generation=2, client_id="c",
                                             client_host="/h") for p in (0, 1))
    assert a.headers is b.headers
    assert a.headers == (("member_id", b"m"), ("generation", b"2"), ("client_id", b"c"), ("client_host", b"/h"))


# GroupMetadata values of versions 0-3 (not flexible), read straight by the fast path,
# against `_Reader`'s field-by-field decoding of the same bytes.

def nullable(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else string(s)


def group_metadata_value(version: int, value: records.GroupMetadataValue) -> bytes:
    out = [struct.pack(">h", version), string(value.protocol_type), struct.pack(">i", value.generation),
           nullable(value.protocol), nullable(value.leader)]
    if version >= 2:
        out.append(struct.pack(">q", value.current_state_timestamp_ms))
    out.append(struct.pack(">i", len(value.members)))
    for m in value.members:
        out += [string(m.member_id), nullable(m.group_instance_id) if version >= 3 else b"", string(m.client_id),
                string(m.client_host), struct.pack(">i", m.rebalance_timeout_ms) if version >= 1 else b"",
                struct.pack(">i", m.session_timeout_ms), struct.pack(">i", len(m.subscription)), m.subscription,
                struct.pack(">i", len(m.assignment)), m.assignment]
    return b"".join(out)


def reader_value(buf: bytes) -> records.GroupMetadataValue:
    reader = codec._Reader(buf)
    version = reader.int16()
    assert 0 <= version < records.FLEXIBLE_VERSION
    value = codec._decode_group_metadata_value(reader, version)
    reader.done()
    return value


versions = st.integers(0, records.FLEXIBLE_VERSION - 1)
optional = st.one_of(st.none(), names)
members = st.lists(st.builds(records.MemberMetadata, names, optional, names, names, int32, int32,
                             st.binary(max_size=40), st.binary(max_size=40)), max_size=3)


@st.composite
def group_metadata_values(draw) -> tuple[int, records.GroupMetadataValue]:
    version = draw(versions)
    value = records.GroupMetadataValue(draw(names), draw(int32), draw(optional), draw(optional),
                                       draw(int64) if version >= 2 else -1, tuple(draw(members)))
    # Fields a version does not carry read back as their defaults.
    shown = tuple(replace(m, group_instance_id=m.group_instance_id if version >= 3 else None,
                          rebalance_timeout_ms=m.rebalance_timeout_ms if version >= 1 else -1) for m in value.members)
    return version, replace(value, members=shown)


@given(drawn=group_metadata_values())
def test_group_metadata_values_of_every_plain_version_decode_as_written(drawn):
    version, value = drawn
    buf = group_metadata_value(version, value)
    assert codec._plain_group_metadata_value(buf) == value
    assert records.deserialize_value(records.GroupMetadataKey("g"), buf) == value == reader_value(buf)


@settings(max_examples=300)
@given(data=st.data(), drawn=group_metadata_values())
def test_damaged_group_metadata_values_decode_as_the_reader_reads_them_or_are_refused(data, drawn):
    buf = data.draw(damaged(group_metadata_value(*drawn)))
    got, expected = outcome(lambda b: records.deserialize_value(records.GroupMetadataKey("g"), b), reader_value, buf)
    assert got == expected
    if expected is None:
        assert codec._plain_group_metadata_value(buf) is None


commit_records = st.builds(
    lambda group, topic, partition, value, headers: records.CoordinatorRecord(
        OffsetCommitKey(group, topic, partition), value, headers),
    # Few names, each also as a second equal object: a run's group and topic change, stay
    # the same object, or stay equal as another object.
    st.sampled_from(["gg", "".join(["g", "g"]), "hh"]),
    st.sampled_from(["tt", "".join(["t", "t"]), "uu"]),
    int32,
    st.one_of(
        st.builds(lambda offset, epoch, ts: OffsetCommitValue(offset, epoch, "", ts), int64, int32, int64),  # inlined
        st.builds(OffsetCommitValue, int64, int32, st.sampled_from(["", "m"]), int64, st.sampled_from([-1, 0, 7]),
                  st.sampled_from([None, uuid.UUID(int=0), uuid.UUID(int=5)])),
        st.none()),
    st.sampled_from([(), (("member", b"m-1"),)]))
other_records = st.sampled_from([
    records.CoordinatorRecord(records.GroupMetadataKey("gg"), records.GroupMetadataValue("consumer", 1, "range", None, 5,
                                                                                       ()), ()),
    records.CoordinatorRecord(records.GroupMetadataKey("gg"), None, ()),
])


@given(st.lists(st.one_of(commit_records, other_records), max_size=12))
def test_a_batch_serializes_as_each_record_does_alone(batch):
    # The batch serializer's run of OffsetCommit records is inlined; every record must
    # still come out as serialize_key and serialize_value make it.
    assert records.serialize_records(batch, LogRecord) == [
        LogRecord(records.serialize_key(k), records.serialize_value(v), h) for k, v, h in batch]
