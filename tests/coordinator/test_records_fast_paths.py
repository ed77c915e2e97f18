"""The struct fast paths of `coordinator.records` (OffsetCommit key type 1, value v3 and
the loader's key memo) against a plain reference reading of the same layout."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator import records
from coordinator.records import OffsetCommitKey, OffsetCommitValue, RecordDecodeError

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


def test_the_audit_headers_of_one_commit_are_one_shared_tuple():
    value = OffsetCommitValue(1, -1, "", 5)
    a, b = (records.new_offset_commit_record("g", "t", p, value, member_id="m", generation=2, client_id="c",
                                             client_host="/h") for p in (0, 1))
    assert a.headers is b.headers
    assert a.headers == (("member_id", b"m"), ("generation", b"2"), ("client_id", b"c"), ("client_host", b"/h"))
