"""RecordBatch v2 decoded to columns with numpy, many batches at once: the offline scanner.

`storage.format` frames and decodes one batch at a time, which is what the service needs
and what costs the offline audit most of its time on large logs. This module reads the
same format with the same rules, vectorised over every batch of a buffer: batch headers
by fancy indexing, and the records' varint framing one record (or header) index at a
time across all batches together. It never decides alone that a batch is damaged: a
batch whose records do not frame cleanly here, or is compressed, is *flagged*, and the
caller hands it to `format.decode_batch` (the one parser), which either words the error
or decodes it. Framing itself (lengths, magic, CRC, offsets) is `format.sound_batches`.

Positions are int64 indexes into one uint8 buffer (`padded`); lengths of null keys, values and
header values are negative, as in the format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from storage.format import BATCH_HEADER_LEN, LOG_OVERHEAD_LEN

_HEADER_FIELDS = {   # name: (position in the batch, width, big-endian dtype)
    "base_offset": (0, 8, ">i8"), "batch_length": (8, 4, ">i4"), "attributes": (21, 2, ">i2"),
    "last_offset_delta": (23, 4, ">i4"), "base_timestamp": (27, 8, ">i8"), "max_timestamp": (35, 8, ">i8"),
    "records_count": (57, 4, ">i4"),
}
MAX_VARINT_BYTES = 10


PAD = 16   # zero bytes a scanned buffer ends with, so that fixed-width reads near its end stay inside it


def padded(data: bytes) -> np.ndarray:
    return np.frombuffer(data + bytes(PAD), np.uint8)


def _rows(buf: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """`width` bytes at each position, one row each (rows of a sliding window: no index matrix)."""
    return sliding_window_view(buf, width)[np.minimum(positions, len(buf) - width)]


def big_endian(buf: np.ndarray, positions: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """The big-endian integers of `width` bytes at `positions`, as native int64."""
    return _rows(buf, positions, width).view(dtype).ravel().astype(np.int64)


def batch_headers(buf: np.ndarray, positions: np.ndarray) -> dict[str, np.ndarray]:
    """The header fields the scanner needs, one array per field, for batches at `positions`."""
    return {name: big_endian(buf, positions + at, width, dtype)
            for name, (at, width, dtype) in _HEADER_FIELDS.items()}


def _varints(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zig-zag varints at `pos`: (values, positions after them, bad). Bad: a byte at or
    past `limit`, or longer than the format allows."""
    last = len(buf) - 1
    bad = pos >= limit
    b = buf[np.minimum(pos, last)].astype(np.int64)
    value = b & 0x7F
    length = np.ones_like(pos)
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while more.size:
        if shift >= 7 * (MAX_VARINT_BYTES - 1):
            # Ten-byte varints exceed int64 here: the reference decoder decides.
            bad[more] = True
            break
        at = pos[more] + length[more]
        bad[more] |= at >= limit[more]
        b = buf[np.minimum(at, last)].astype(np.int64)
        value[more] |= (b & 0x7F) << shift
        length[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return (value >> 1) ^ -(value & 1), pos + length, bad


@dataclass(slots=True)
class RecordSpans:
    """One entry per record, batch by batch in order, record by record within a batch."""

    batch: np.ndarray            # index of the record's batch in the batches given
    timestamp_delta: np.ndarray
    offset_delta: np.ndarray
    key_pos: np.ndarray
    key_len: np.ndarray          # < 0: null key
    value_pos: np.ndarray
    value_len: np.ndarray        # < 0: null value (a tombstone)
    headers_pos: np.ndarray
    record_end: np.ndarray
    # The record whose header bytes this one repeats (itself, if the first of them in
    # its batch): one commit's records share their audit headers, parsed once.
    header_owner: np.ndarray


@dataclass(slots=True)
class HeaderSpans:
    """One entry per header of each header owner (see RecordSpans), in order."""

    record: np.ndarray           # the owner: an index into the RecordSpans
    name_pos: np.ndarray
    name_len: np.ndarray
    value_pos: np.ndarray
    value_len: np.ndarray        # < 0: null


def walk_records(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray,
                 bounds: np.ndarray) -> tuple[RecordSpans, HeaderSpans, np.ndarray]:
    """The records of uncompressed batches whose records lie in `buf[starts[i]:ends[i]]`,
    `counts[i]` of them, and their headers (`bounds`: see `views`). Returns the spans of the batches that frame
    cleanly and `ok`, per batch; spans of batches not ok are left out."""
    n = len(starts)
    ok = counts >= 0
    counts = np.maximum(counts, 0)
    first = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    total = int(first[-1])
    out = {name: np.zeros(total, np.int64) for name in RecordSpans.__slots__}
    out["batch"] = np.repeat(np.arange(n, dtype=np.int64), counts)
    cursor = starts.astype(np.int64).copy()
    active = np.flatnonzero(counts > 0)
    k = 0
    while active.size:
        limit = ends[active]
        length, pos, bad = _varints(buf, cursor[active], limit)
        record_end = pos + length
        pos = pos + 1                                           # record attributes
        ts_delta, pos, bad2 = _varints(buf, pos, limit)
        offset_delta, pos, bad3 = _varints(buf, pos, limit)
        key_len, pos, bad4 = _varints(buf, pos, limit)
        key_pos = pos
        pos = pos + np.maximum(key_len, 0)
        value_len, pos, bad5 = _varints(buf, pos, limit)
        value_pos = pos
        pos = pos + np.maximum(value_len, 0)
        bad = bad | bad2 | bad3 | bad4 | bad5 | (pos > record_end) | (record_end > limit)
        at = first[active] + k
        for name, values in (("timestamp_delta", ts_delta), ("offset_delta", offset_delta), ("key_pos", key_pos),
                             ("key_len", key_len), ("value_pos", value_pos), ("value_len", value_len),
                             ("headers_pos", pos), ("record_end", record_end)):
            out[name][at] = values
        ok[active[bad]] = False
        cursor[active] = record_end
        k += 1
        active = active[~bad & (counts[active] > k)]
    ok &= cursor == ends
    spans = RecordSpans(**out)
    spans.header_owner = _header_owners(buf, spans)
    headers, bad_records = _walk_headers(buf, spans, ok[spans.batch], bounds)
    if bad_records.size:
        ok[spans.batch[bad_records]] = False
    keep = ok[spans.batch]
    if not keep.all():
        spans = RecordSpans(**{name: getattr(spans, name)[keep] for name in RecordSpans.__slots__})
        renumber = np.cumsum(keep) - 1
        spans.header_owner = renumber[spans.header_owner]
        header_keep = keep[headers.record]
        headers = HeaderSpans(renumber[headers.record[header_keep]],
                              *(getattr(headers, name)[header_keep] for name in HeaderSpans.__slots__[1:]))
    return spans, headers, ok


OWNER_COMPARE_BYTES = 128   # longer header blocks are not compared: each is its own owner
_COMPARE_CHUNK = 1 << 16


def _header_owners(buf: np.ndarray, spans: RecordSpans) -> np.ndarray:
    """Per record, the first record before it in its batch with the same header bytes
    (compared whole), through an unbroken run of them; else itself. Only an
    optimisation: a record that is its own owner is always right."""
    n = len(spans.batch)
    length = spans.record_end - spans.headers_pos
    candidate = np.flatnonzero((spans.batch[1:] == spans.batch[:-1]) & (length[1:] == length[:-1])
                               & (length[1:] >= 0) & (length[1:] <= OWNER_COMPARE_BYTES)) + 1
    same = np.zeros(n, bool)
    if candidate.size:
        width = int(length[candidate].max())
        if width:
            columns = np.arange(width)
            for start in range(0, len(candidate), _COMPARE_CHUNK):
                chunk = candidate[start:start + _COMPARE_CHUNK]
                differ = _rows(buf, spans.headers_pos[chunk], width) != _rows(buf, spans.headers_pos[chunk - 1], width)
                differ &= columns < length[chunk][:, None]
                same[chunk[~differ.any(axis=1)]] = True
        else:
            same[candidate] = True
    owner = np.where(same, 0, np.arange(n))
    np.maximum.accumulate(owner, out=owner)
    return owner


def _walk_headers(buf: np.ndarray, spans: RecordSpans, framed: np.ndarray,
                  bounds: np.ndarray) -> tuple[HeaderSpans, np.ndarray]:
    """The headers of every header owner among the `framed` records, which must end
    exactly at the record's end; the records whose headers do not (or whose header names
    are not UTF-8)."""
    owners = np.flatnonzero((spans.header_owner == np.arange(len(spans.batch))) & framed)
    ends = spans.record_end[owners]
    count, pos, bad = _varints(buf, spans.headers_pos[owners], ends)
    bad |= (count < 0) | (count * 2 > ends - pos)          # a header takes two bytes at least
    count = np.where(bad, 0, count)
    first = np.zeros(len(count) + 1, np.int64)
    np.cumsum(count, out=first[1:])
    total = int(first[-1])
    out = {name: np.zeros(total, np.int64) for name in HeaderSpans.__slots__}
    out["record"] = np.repeat(owners, count)
    cursor = pos
    active = np.flatnonzero(count > 0)
    h = 0
    while active.size:
        limit = ends[active]
        name_len, pos, bad1 = _varints(buf, cursor[active], limit)
        name_pos = pos
        pos = pos + np.maximum(name_len, 0)
        value_len, pos, bad2 = _varints(buf, pos, limit)
        value_pos = pos
        pos = pos + np.maximum(value_len, 0)
        failed = bad1 | bad2 | (name_len < 0) | (pos > limit)
        at = first[active] + h
        for name, values in (("name_pos", name_pos), ("name_len", name_len), ("value_pos", value_pos),
                             ("value_len", value_len)):
            out[name][at] = values
        bad[active[failed]] = True
        cursor[active] = pos
        h += 1
        active = active[~failed & (count[active] > h)]
    bad |= cursor != ends
    headers = HeaderSpans(**out)
    if total:
        names = pc.dictionary_encode(views(buf, headers.name_pos, headers.name_len, bounds))
        # A header whose walk failed has a null name: not a copy-free array, and its record
        # is already bad.
        indices = names.indices.to_numpy(zero_copy_only=False)
        for index, raw in enumerate(names.dictionary.to_pylist()):
            try:
                raw.decode()
            except UnicodeDecodeError:
                bad[np.searchsorted(owners, headers.record[indices == index])] = True
    bad_owners = owners[bad]
    # A record repeating a bad owner's bytes is as bad: its batch goes with the owner's.
    return headers, bad_owners


def views(buf: np.ndarray, pos: np.ndarray, lengths: np.ndarray, bounds: np.ndarray) -> pa.Array:
    """A binary_view array of `buf[pos[i]:pos[i] + lengths[i]]` (null where the length is
    negative), pointing into `buf` without copying the long ones. `bounds` are the starts
    of the pieces of `buf` no value crosses (segments: each under 2 GiB, as a view's
    offset is 32-bit), the first one 0."""
    n = len(pos)
    lengths = lengths.astype(np.int64)
    null = lengths < 0
    size = np.where(null, 0, lengths)
    raw = np.zeros((n, 16), np.uint8)
    raw[:, 0:4] = size.astype("<i4").view(np.uint8).reshape(n, 4)
    gathered = _rows(buf, pos, 12)
    gathered *= np.arange(12)[None, :] < size[:, None]
    inline = size <= 12
    raw[inline, 4:16] = gathered[inline]
    long = np.flatnonzero(~inline)
    piece = np.searchsorted(bounds, pos[long], side="right") - 1
    raw[long, 4:8] = gathered[long, :4]
    raw[long, 8:12] = piece.astype("<i4").view(np.uint8).reshape(-1, 4)
    raw[long, 12:16] = (pos[long] - bounds[piece]).astype("<i4").view(np.uint8).reshape(-1, 4)
    validity = None
    if null.any():
        validity = pa.py_buffer(np.packbits(~null, bitorder="little").tobytes())
    edges = [*bounds.tolist(), len(buf)]
    pieces = [pa.py_buffer(buf[edges[i]:edges[i + 1]]) for i in range(len(bounds))]
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(raw), *pieces],
                                 null_count=int(null.sum()))


def records_region(positions: np.ndarray, batch_length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the records of (uncompressed) batches at `positions` start and end."""
    return positions + BATCH_HEADER_LEN, positions + LOG_OVERHEAD_LEN + batch_length
