import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import FrameError, FrameReader, FrameTooLarge, InvalidFrame

MAX = 1024


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _feed_in_chunks(reader: FrameReader, stream: bytes, cuts: list[int]) -> list[bytes]:
    out = []
    start = 0
    for cut in sorted(set(cuts)) + [len(stream)]:
        out.extend(reader.feed(stream[start:cut]))
        start = cut
    return out


@given(payloads=st.lists(st.binary(max_size=300), max_size=20),
       cuts=st.lists(st.integers(min_value=0, max_value=7000), max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_split_of_the_stream_gives_the_same_frames(payloads, cuts):
    stream = b"".join(_frame(p) for p in payloads)
    reader = FrameReader(MAX)

    frames = _feed_in_chunks(reader, stream, [c for c in cuts if c <= len(stream)])

    assert frames == payloads
    assert reader.buffered_bytes == 0


@given(payloads=st.lists(st.binary(min_size=1, max_size=50), min_size=1, max_size=10))
def test_byte_at_a_time_gives_the_same_frames(payloads):
    stream = b"".join(_frame(p) for p in payloads)
    reader = FrameReader(MAX)
    frames = []
    for i in range(len(stream)):
        frames.extend(reader.feed(stream[i:i + 1]))
    assert frames == payloads


def test_many_small_frames_in_one_read_come_out_in_order():
    payloads = [bytes([i % 256]) * (i % 7) for i in range(1000)]
    assert FrameReader(MAX).feed(b"".join(_frame(p) for p in payloads)) == payloads


def test_incomplete_frame_is_held_until_its_last_byte():
    reader = FrameReader(MAX)
    stream = _frame(b"hello") + _frame(b"world")

    assert reader.feed(stream[:11]) == [b"hello"]
    assert reader.buffered_bytes == 2
    assert reader.feed(stream[11:17]) == []
    assert reader.buffered_bytes == 8
    assert reader.feed(stream[17:]) == [b"world"]
    assert reader.buffered_bytes == 0


def test_zero_length_frame_is_an_empty_payload():
    assert FrameReader(MAX).feed(_frame(b"") + _frame(b"x")) == [b"", b"x"]


def test_frame_of_exactly_the_limit_is_accepted():
    payload = b"\x01" * MAX
    assert FrameReader(MAX).feed(_frame(payload)) == [payload]


def test_frame_one_byte_over_the_limit_is_refused():
    with pytest.raises(FrameTooLarge, match="1025 exceeds the limit of 1024"):
        FrameReader(MAX).feed(struct.pack(">i", MAX + 1))


def test_negative_size_is_an_invalid_frame():
    with pytest.raises(InvalidFrame, match="negative frame size -1"):
        FrameReader(MAX).feed(b"\xff\xff\xff\xff")


def test_oversized_length_split_across_reads_is_refused_when_the_size_completes():
    reader = FrameReader(MAX)
    assert reader.feed(b"\x7f\xff") == []
    with pytest.raises(FrameTooLarge):
        reader.feed(b"\xff\xff")


def test_two_gib_length_raises_before_allocating():
    reader = FrameReader(100 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLarge):
            reader.feed(struct.pack(">i", 2**31 - 1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_announced_size_is_not_allocated_before_the_bytes_arrive():
    reader = FrameReader(64 * 1024 * 1024)
    tracemalloc.start()
    try:
        reader.feed(struct.pack(">i", 64 * 1024 * 1024) + b"x" * 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reader.buffered_bytes == 14
    assert peak < 64 * 1024


def test_frame_errors_share_a_base_class():
    assert issubclass(FrameTooLarge, FrameError)
    assert issubclass(InvalidFrame, FrameError)


def test_negative_limit_is_a_configuration_error():
    with pytest.raises(ValueError):
        FrameReader(-1)


def test_a_large_frame_over_large_and_small_reads_comes_out_whole_and_in_order():
    from protocol.framing import VIEW_MIN_BYTES

    payload = bytes(range(256)) * (3 * VIEW_MIN_BYTES // 256) + b"tail"
    stream = _frame(payload) + _frame(b"next")
    cuts = [0, 3, 4, 100, 100 + VIEW_MIN_BYTES, 101 + VIEW_MIN_BYTES, 102 + VIEW_MIN_BYTES,
            len(stream) - 5, len(stream)]
    reader = FrameReader(2**20)
    out = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        out.extend(reader.feed(stream[start:end]))
        if not out:
            assert reader.buffered_bytes == end
    assert out == [payload, b"next"]


def test_a_frame_dribbled_a_byte_at_a_time_is_gathered_in_one_buffer():
    reader = FrameReader(MAX)
    for byte in _frame(b"x" * 1000)[:-1]:
        assert reader.feed(bytes([byte])) == []
    assert len(reader._partial) == 1            # one bytearray, not an object per byte
    assert reader.feed(b"x") == [b"x" * 1000]


def test_a_mutable_buffer_fed_and_then_changed_does_not_change_the_frame():
    reader = FrameReader(2**20)
    big = bytearray(_frame(b"a" * 200_000))
    assert reader.feed(big[:150_000]) == []
    chunk = bytearray(big[150_000:])
    frames = reader.feed(chunk)
    chunk[:] = b"z" * len(chunk)
    assert frames == [b"a" * 200_000]


@given(payloads=st.lists(st.binary(max_size=300), min_size=3, max_size=8),
       taken=st.integers(min_value=0, max_value=7), cut=st.integers(min_value=0, max_value=400))
@settings(max_examples=200, deadline=None)
def test_a_frame_taken_over_mid_way_leaves_the_reader_at_the_next_frame(payloads, taken, cut):
    """Cut-through: the caller takes the frame being gathered and reads its rest itself."""
    taken %= len(payloads)
    stream = b"".join(_frame(p) for p in payloads)
    start = sum(4 + len(p) for p in payloads[:taken])
    end = start + 4 + len(payloads[taken])
    cut = start + 4 + min(cut, len(payloads[taken]) - 1) if payloads[taken] else None
    reader = FrameReader(MAX)
    if cut is None:     # an empty payload is never partial: nothing to take over
        assert reader.feed(stream) == payloads
        return

    assert reader.feed(stream[:cut]) == payloads[:taken]
    assert reader.partial_size == len(payloads[taken])
    assert reader.partial_head(4) == payloads[taken][:min(4, cut - start - 4)]
    parts, remaining = reader.take_partial()
    assert b"".join(parts) + stream[cut:cut + remaining] == payloads[taken]
    assert cut + remaining == end and reader.partial_size == 0
    assert reader.feed(stream[end:]) == payloads[taken + 1:]


def test_the_head_of_a_frame_gathered_over_several_reads():
    reader = FrameReader(2**30)
    reader.feed(struct.pack(">i", 200_000) + b"ab")
    reader.feed(b"c" * 100_000)            # kept as a view, after the gathered bytearray
    assert reader.partial_head(4) == b"abcc"
    with pytest.raises(ValueError):
        FrameReader(MAX).take_partial()
