"""Offline compaction of one partition over its columns (`columns.scan_columns`).

`compact.compact_partition`'s rules, decided per record with numpy: the latest offset per
key over the batches whose records supersede (`storage.compaction.supersedes`), then per
record whether it survives (no key; or the latest of its key and not a tombstone past
`delete_retention_ms`). A batch that keeps every record is copied byte for byte; one that
keeps some is decoded by `storage.format` and cut by `storage.compaction.compact_batch`
itself; one that keeps none is dropped. Written by `compact.write_compacted`, so the
output is the same bytes either way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from coordinator.offline.columns import PartitionColumns
from coordinator.offline.compact import write_compacted
from storage.compaction import CompactionStats, compact_batch
from storage.format import batch_header, decode_batch, encode_stored_batch
from storage.segment import SegmentIO


def compact_columns(cols: PartitionColumns, out_dir: Path, now_ms: int, delete_retention_ms: int,
                    segment_bytes: int, io: SegmentIO | None = None) -> CompactionStats:
    """`compact_partition` over a partition's columns: the same rules decided per record
    with numpy (latest offset per key, expired tombstones); a batch that keeps all its
    records is copied, one that keeps some goes through `compact_batch` as above."""
    spans = cols.records
    batch = spans.batch
    decoded = np.flatnonzero(cols.decoded)
    supersedes = cols.supersedes[batch]
    keyed = spans.key_len >= 0
    encoded = pc.dictionary_encode(cols.views(spans.key_pos, spans.key_len), null_encoding="encode")
    key = encoded.indices.to_numpy().astype(np.int64)
    latest = np.full(len(encoded.dictionary), -1, np.int64)
    counted = supersedes & keyed
    np.maximum.at(latest, key[counted], cols.offset[counted])
    alive = (spans.value_len >= 0) | (now_ms < cols.timestamp + delete_retention_ms)
    survives = ~supersedes | ~keyed | ((latest[np.maximum(key, 0)] <= cols.offset) & alive)
    count = np.bincount(batch, minlength=len(cols.decoded))
    kept_count = np.bincount(batch[survives], minlength=len(cols.decoded))
    kept: list[tuple[int, bytes | memoryview, int]] = []
    whole = kept_count == count
    first = np.concatenate([[0], np.cumsum(count)])
    buf = cols.buf.data.cast("B")
    for b in decoded[kept_count[decoded] > 0].tolist():
        if whole[b]:
            kept.append((int(cols.base_offset[b]), cols.raw(b), int(count[b])))
            continue
        start = int(cols.position[b])
        stored = decode_batch(buf, start, batch_header(buf, start))
        these = {r.key: int(latest[k]) for r, k in zip(stored.records, key[first[b]:first[b + 1]].tolist(), strict=True) if r.key is not None}
        partial = compact_batch(stored, these, now_ms, delete_retention_ms)
        if partial is None:
            raise RuntimeError(f"batch at offset {stored.base_offset}: the columns keep records compact_batch drops")
        kept.append((partial.base_offset, encode_stored_batch(partial), len(partial.records)))
    before = CompactionStats(records_before=int(count[decoded].sum()), batches_before=len(decoded),
                             bytes_before=int(cols.size[decoded].sum()))
    return write_compacted(kept, before, cols.scan.next_offset, out_dir, segment_bytes, io)
