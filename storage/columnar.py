"""RecordBatch v2 decoded to columns with numpy, many batches at once: the offline scanner.

`storage.format` frames and decodes one batch at a time, which is what the service needs
and what costs the offline audit most of its time on large logs. This module reads the
same format with the same rules, vectorised over every batch of a buffer: batch headers
and fixed-width fields by gathers from unaligned views of the buffer, and the records'
varint framing one record index at a time across all batches together. Header blocks
(a record's header bytes) repeat, one per writer, so each distinct block is decoded once
by `format.decode_header_block`. It never decides alone that a batch is damaged: a batch
whose records or header blocks do not frame cleanly here, or is compressed, is
*flagged*, and the caller hands it to `format.decode_batch` (the one parser), which
either words the error or decodes it. Framing itself (lengths, magic, CRC, offsets) is
`format.sound_batches`.

Positions are int64 indexes into one uint8 buffer (`padded`); lengths of null keys, values and
header values are negative, as in the format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from storage.format import BATCH_HEADER_LEN, LOG_OVERHEAD_LEN, decode_header_block

_HEADER_FIELDS = {   # name: (position in the batch, big-endian dtype)
    "base_offset": (0, ">i8"), "batch_length": (8, ">i4"), "attributes": (21, ">i2"),
    "last_offset_delta": (23, ">i4"), "base_timestamp": (27, ">i8"), "max_timestamp": (35, ">i8"),
    "records_count": (57, ">i4"),
}
MAX_VARINT_BYTES = 10

Headers = tuple[tuple[str, bytes | None], ...]

PAD = 64   # zero bytes a scanned buffer ends with: any fixed-width read (a batch header at most) fits


def padded(chunks: list[bytes | memoryview]) -> np.ndarray:
    """The chunks one after another, then PAD zero bytes (one copy)."""
    return np.frombuffer(b"".join([*chunks, bytes(PAD)]), np.uint8)


def _unaligned(buf: np.ndarray, width: int, dtype: str | np.dtype) -> np.ndarray:
    """A view of `buf` whose element i is the `width`-byte value at byte i: one gather
    reads a field (or a structure) at any positions, aligned or not."""
    return np.ndarray((len(buf) - width + 1,), dtype, buffer=buf, strides=(1,))


def fixed(buf: np.ndarray, positions: np.ndarray, width: int, dtype: str | np.dtype) -> np.ndarray:
    """The values of `width` bytes (`dtype`, its byte order included) at `positions`, as
    they are (positions past the end read the last `width` bytes)."""
    return _unaligned(buf, width, dtype)[np.minimum(positions, len(buf) - width)]


def packed(fields: dict[str, tuple[int, str]], size: int) -> np.dtype:
    """A structure of `size` bytes with each field (position in it, dtype) where the format puts it."""
    return np.dtype({"names": list(fields), "formats": [kind for _at, kind in fields.values()],
                     "offsets": [at for at, _kind in fields.values()], "itemsize": size})


def structs(buf: np.ndarray, positions: np.ndarray, dtype: np.dtype) -> dict[str, np.ndarray]:
    """The fields of the structures at `positions`, each as native int64: their bytes
    gathered as rows (a plain copy per structure, cheaper than numpy's per-element copy
    of an unaligned structure), then viewed as the structure."""
    size = dtype.itemsize
    rows = sliding_window_view(buf, size)[np.minimum(positions, len(buf) - size)]
    found = rows.view(dtype).ravel()
    assert dtype.names is not None      # built by `packed`: a structured dtype
    return {name: found[name].astype(np.int64) for name in dtype.names}


_BATCH_HEADER = packed(_HEADER_FIELDS, BATCH_HEADER_LEN)


def batch_headers(buf: np.ndarray, positions: np.ndarray) -> dict[str, np.ndarray]:
    """The header fields the scanner needs, one array per field, for batches at `positions`."""
    return structs(buf, positions, _BATCH_HEADER)


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
    header_block: np.ndarray     # the record's headers: an index into the decoded header blocks


def walk_records(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray,
                 bounds: np.ndarray) -> tuple[RecordSpans, list[Headers], np.ndarray]:
    """The records of uncompressed batches whose records lie in `buf[starts[i]:ends[i]]`,
    `counts[i]` of them (`bounds`: see `views`). Returns the spans of the batches that
    frame cleanly, their distinct header blocks decoded (`RecordSpans.header_block`
    indexes them), and `ok`, per batch; spans of batches not ok are left out."""
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
    framed = np.flatnonzero(ok[spans.batch])
    blocks, block_of, bad_records = _header_blocks(buf, spans, framed, bounds)
    spans.header_block[framed] = block_of
    if bad_records.size:
        ok[spans.batch[bad_records]] = False
    keep = ok[spans.batch]
    if not keep.all():
        spans = RecordSpans(**{name: getattr(spans, name)[keep] for name in RecordSpans.__slots__})
    return spans, blocks, ok


def _header_blocks(buf: np.ndarray, spans: RecordSpans, rows: np.ndarray,
                   bounds: np.ndarray) -> tuple[list[Headers], np.ndarray, np.ndarray]:
    """The distinct header blocks of the records `rows`, each decoded once by the
    reference's rules; per row, its block's index; and the rows whose block does not
    decode (a bad block's index points at an empty one, never used)."""
    pos = spans.headers_pos[rows]
    encoded = pc.dictionary_encode(views(buf, pos, spans.record_end[rows] - pos, bounds))
    index = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    blocks: list[Headers] = []
    bad_blocks = []
    names: dict[bytes, str] = {}
    for number, raw in enumerate(encoded.dictionary.to_pylist()):
        try:
            blocks.append(decode_header_block(raw, names))
        except ValueError:
            blocks.append(())
            bad_blocks.append(number)
    bad = rows[np.isin(index, bad_blocks)] if bad_blocks else np.zeros(0, np.int64)
    return blocks, index, bad


# Masks that keep the first k bytes of a little-endian word, and a binary_view entry.
_LOW_BYTES_8 = np.asarray([(1 << (8 * k)) - 1 for k in range(9)], np.uint64)
_LOW_BYTES_4 = np.asarray([(1 << (8 * k)) - 1 for k in range(5)], np.uint32)
_VIEW = np.dtype({"names": ["size", "head", "tail"], "formats": ["<u4", "<u8", "<u4"], "offsets": [0, 4, 12],
                  "itemsize": 16})


def views(buf: np.ndarray, pos: np.ndarray, lengths: np.ndarray, bounds: np.ndarray) -> pa.Array:
    """A binary_view array of `buf[pos[i]:pos[i] + lengths[i]]` (null where the length is
    negative), pointing into `buf` without copying the long ones. `bounds` are the starts
    of the pieces of `buf` no value crosses (segments: each under 2 GiB, as a view's
    offset is 32-bit), the first one 0."""
    n = len(pos)
    lengths = lengths.astype(np.int64)
    null = lengths < 0
    size = np.where(null, 0, lengths)
    # Each view is 16 little-endian bytes: the length, then up to 12 bytes inline, or the
    # first 4 bytes, the piece and the position in it.
    long = size > 12
    piece = np.searchsorted(bounds, pos, side="right") - 1
    head = fixed(buf, pos, 8, "<u8")
    raw = np.empty(n, _VIEW)
    raw["size"] = size
    raw["head"] = np.where(long, (head & np.uint64(0xFFFFFFFF)) | (piece.astype(np.uint64) << np.uint64(32)),
                           head & _LOW_BYTES_8[np.minimum(size, 8)])
    raw["tail"] = np.where(long, pos - bounds[piece],
                           fixed(buf, pos + 8, 4, "<u4") & _LOW_BYTES_4[np.clip(size - 8, 0, 4)])
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
