"""One partition's segments read into columns: every batch and record at once, in numpy.

The same walk as `scan.PartitionScan` (its segments, its framing runs, its damage
findings and live-tail rule: it *is* a PartitionScan underneath), but the records are
not decoded one by one: `storage.columnar` frames all of them together. Batches it
cannot frame cleanly, and compressed ones, go to `format.decode_batch`: what that
refuses is an undecodable batch, as in the record-by-record scan; what it decodes is
written back uncompressed (`format.encode_stored_batch`) after the segments in the
buffer and framed from there, so every record is read from one buffer the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from coordinator.offline.scan import PartitionScan
from storage import columnar
from storage.format import (
    COMPRESSION_MASK,
    CONTROL_FLAG,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    BatchDecodeError,
    batch_header,
    decode_batch,
    encode_stored_batch,
)


@dataclass(slots=True)
class PartitionColumns:
    """The sound batches of a partition (per-batch arrays) and their records (per-record
    arrays, in offset order), over `buf`: the segments one after another, then the
    re-encoded copies of batches that needed the reference decoder."""

    scan: PartitionScan
    buf: np.ndarray
    bounds: np.ndarray                       # where each segment (and the copies) starts in buf
    segment_names: list[str]
    # Per batch.
    position: np.ndarray                     # in buf
    segment: np.ndarray                      # index into segment_names
    size: np.ndarray
    base_offset: np.ndarray
    attributes: np.ndarray
    decoded: np.ndarray                      # False: undecodable (a finding), no records
    # Per record.
    records: columnar.RecordSpans
    offset: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    timestamp: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    header_blocks: list[columnar.Headers] = field(default_factory=list)   # see RecordSpans.header_block
    # Per batch, where the batches are not bytes of a log (a topic's rows): else read from them.
    producer_id: np.ndarray | None = None

    @property
    def control(self) -> np.ndarray:
        return (self.attributes & CONTROL_FLAG) != 0

    @property
    def supersedes(self) -> np.ndarray:
        return (self.attributes & (CONTROL_FLAG | TRANSACTIONAL_FLAG)) == 0

    def segment_position(self, batch: int) -> tuple[str, int]:
        index = int(self.segment[batch])
        return self.segment_names[index], int(self.position[batch] - self.bounds[index])

    def raw(self, batch: int) -> memoryview:
        start = int(self.position[batch])
        return self.buf.data[start:start + int(self.size[batch])].cast("B")

    def views(self, pos: np.ndarray, lengths: np.ndarray):
        return columnar.views(self.buf, pos, lengths, self.bounds)


def scan_columns(partition: int, directory: Path) -> PartitionColumns:
    scan = PartitionScan(partition, directory)
    # The segments are read straight into one buffer, with the zero bytes the columnar
    # reads need after them.
    whole = bytearray(scan.segments_size() + columnar.PAD)
    names: list[str] = []
    bounds: list[int] = []
    runs: list[np.ndarray] = []
    segments: list[np.ndarray] = []
    at = 0
    for name, data, active in scan.segments(memoryview(whole)[:-columnar.PAD]):
        for run in scan.sound_runs(name, data, active):
            runs.append(np.asarray(run, np.int64) + at)
            segments.append(np.full(len(run), len(names), np.int64))
        names.append(name)
        bounds.append(at)
        at += len(data)
    scan.torn_files()
    buf = np.frombuffer(whole, np.uint8)
    joined = buf.data[:at]
    position = np.concatenate(runs) if runs else np.zeros(0, np.int64)
    segment = np.concatenate(segments) if segments else np.zeros(0, np.int64)
    head = columnar.batch_headers(buf, position)
    count = head["records_count"]
    plain = np.flatnonzero((head["attributes"] & COMPRESSION_MASK) == 0)
    bounds_arr = np.asarray(bounds or [0], np.int64)
    starts, ends = columnar.records_region(position[plain], head["batch_length"][plain])
    spans, blocks, ok = columnar.walk_records(buf, starts, ends, count[plain], bounds_arr)
    decoded = np.ones(len(position), bool)
    walked = [(plain, spans, blocks, {name: values[plain] for name, values in head.items()})]
    # The rest: compressed, or not framed cleanly here. The reference decoder decides.
    needs_reference = np.ones(len(position), bool)
    needs_reference[plain[ok]] = False
    rest = np.flatnonzero(needs_reference)
    copies: list[bytes] = []
    for batch in rest.tolist():
        start = int(position[batch])
        try:
            stored = decode_batch(joined, start, batch_header(joined, start))
        except BatchDecodeError as e:
            segment_name = names[int(segment[batch])]
            scan.undecodable(segment_name, start - bounds[int(segment[batch])], int(head["base_offset"][batch]), e)
            decoded[batch] = False
            continue
        copies.append(encode_stored_batch(stored))
    if copies:
        bounds.append(at)
        copy_positions = at + np.cumsum([0] + [len(c) for c in copies[:-1]]).astype(np.int64)
        buf = columnar.padded([joined, *copies])
        bounds_arr = np.asarray(bounds, np.int64)
        copy_head = columnar.batch_headers(buf, copy_positions)
        starts, ends = columnar.records_region(copy_positions, copy_head["batch_length"])
        copy_spans, copy_blocks, copy_ok = columnar.walk_records(buf, starts, ends, copy_head["records_count"],
                                                                  bounds_arr)
        assert copy_ok.all(), "a batch storage.format decoded does not frame once re-encoded"
        walked.append((rest[decoded[rest]], copy_spans, copy_blocks, copy_head))
    columns = PartitionColumns(scan, buf, bounds_arr, names, position, segment,
                               columnar.LOG_OVERHEAD_LEN + head["batch_length"], head["base_offset"],
                               head["attributes"], decoded, spans)
    _merge_records(columns, walked)
    return columns


def _merge_records(columns: PartitionColumns, walked: list) -> None:
    """Records of every walk, in batch (offset) order, with offsets and timestamps from
    the header of the batch they were framed in (a re-encoded copy carries its records'
    own timestamps). Each walk is (partition batch of each walked batch, spans, header
    blocks, the walked batches' headers)."""
    records: list[columnar.RecordSpans] = []
    offsets: list[np.ndarray] = []
    stamps: list[np.ndarray] = []
    blocks: list[columnar.Headers] = []
    for batches, spans, walk_blocks, head in walked:
        own = spans.batch
        stamp_type = head["attributes"][own] & TIMESTAMP_TYPE_MASK
        offsets.append(head["base_offset"][own] + spans.offset_delta)
        stamps.append(np.where(stamp_type != 0, head["max_timestamp"][own],
                               head["base_timestamp"][own] + spans.timestamp_delta))
        spans.batch = batches[own]
        spans.header_block = spans.header_block + len(blocks)
        records.append(spans)
        blocks += walk_blocks
    columns.header_blocks = blocks
    if len(records) == 1:
        columns.records, columns.offset, columns.timestamp = records[0], offsets[0], stamps[0]
        return
    merged = {name: np.concatenate([getattr(r, name) for r in records]) for name in columnar.RecordSpans.__slots__}
    order = np.argsort(merged["batch"], kind="stable")
    columns.records = columnar.RecordSpans(**{name: values[order] for name, values in merged.items()})
    columns.offset = np.concatenate(offsets)[order]
    columns.timestamp = np.concatenate(stamps)[order]
