"""The audit of one partition over its columns (`columns.scan_columns`): the same replay
and the same findings as `PartitionAudit.add` record by record, computed with numpy.

Keys and header values repeat (a partition holds thousands of groups, millions of
commits): each distinct key and header value is decoded once, by `coordinator.records`
and `audit.Writer`'s rules, and the records refer to it by index. OffsetCommit values of
the shapes kgc and Kafka write (v3 without metadata; v4 without metadata, with or without
the topic id) are read as columns; any other value, and every GroupMetadata value (one per
rebalance), is decoded by `coordinator.records`.
Then, per record, what the replay would have said:

- offset regression: sorted by key (stably, so in offset order within a key), a commit
  below the one just before it, when that one was not a tombstone;
- stale generation: the group's last GroupMetadata before the commit (an as-of lookup
  in the group's metadata records by offset; a tombstone ends it) has a newer generation
  than the commit's header;
- stale member epoch: the same as-of lookup, by (group, member id), in the KIP-848
  members' current-assignment records (type 8), with `MemberEpoch.refuses`'s rule.

The final state (latest commit per key, the groups' last metadata) goes to
`PartitionAudit.finish`, which judges it exactly as after a replay.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from coordinator import records
from coordinator.offline.audit import (
    AuditResult,
    Committed,
    MemberEpoch,
    PartitionAudit,
    Writer,
    stale_epoch_detail,
)
from coordinator.offline.columns import PartitionColumns
from coordinator.offline.findings import Finding, FindingType
from coordinator.offline.record_values import consumer_group_value, value_as
from coordinator.records import (
    ConsumerGroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from storage.columnar import packed, structs
from storage.format import TRANSACTIONAL_FLAG

_PRODUCER_ID_POS = 43     # in a batch (storage/format.py)

_COMMIT, _GROUP, _OTHER, _BAD, _CONSUMER = 0, 1, 2, 3, 4
_V3 = records.OFFSET_COMMIT_VALUE_VERSION
_V3_NO_METADATA = packed({"version": (0, ">i2"), "offset": (2, ">i8"), "leader_epoch": (10, ">i4"),
                          "metadata_length": (14, ">i2"), "commit_timestamp": (16, ">i8")}, 24)   # metadata ""
# v4 (flexible; what Kafka 4.1+ writes), metadata "": a one-byte compact length (1), then the
# tagged fields: none (24 bytes, as v3), or only the topic id (tag 0, 16 bytes: 42 bytes).
_V4 = records.OFFSET_COMMIT_VALUE_VERSION_WITH_TOPIC_ID
_V4_FIELDS = {"version": (0, ">i2"), "offset": (2, ">i8"), "leader_epoch": (10, ">i4"), "metadata_length": (14, "u1"),
              "commit_timestamp": (15, ">i8"), "tags": (23, "u1")}
_V4_NO_METADATA = packed(_V4_FIELDS, 24)
_V4_TOPIC_ID = packed({**_V4_FIELDS, "tag": (24, "u1"), "tag_size": (25, "u1")}, 42)
_V4_TOPIC_ID_AT = 26

K = TypeVar("K")


def audit_columns(cols: PartitionColumns, audit: PartitionAudit) -> AuditResult:
    spans = cols.records
    control = cols.control[spans.batch]
    audit.skipped_records += int(control.sum())
    readable = ~control
    if audit.until_ms is not None:
        readable &= cols.timestamp < audit.until_ms
    rows = np.flatnonzero(readable)
    audit.records += len(rows)
    keys = _Keys(cols, rows)
    writers = _writers(cols)
    commit_rows = rows[keys.kind == _COMMIT]
    commit_keys = keys.index[keys.kind == _COMMIT]
    values = _CommitValues(cols, commit_rows, commit_keys, keys)
    for row, error in keys.errors + values.errors:
        _undecodable(audit, cols, row, error)
    good = values.good
    commit_rows, commit_keys = commit_rows[good], commit_keys[good]
    offset, tombstone = values.offset[good], values.tombstone[good]
    group_events = _group_metadata(cols, rows[keys.kind == _GROUP], keys, audit)
    epoch_events = _replay_groups(cols, rows, keys, group_events, audit)
    writer = writers.take(commit_rows)
    by_key = np.argsort(commit_keys, kind="stable")           # offset order within each key
    _regressions(cols, audit, keys, commit_rows, commit_keys, by_key, offset, tombstone, writer)
    _stale_generations(cols, audit, keys, commit_rows, commit_keys, offset, tombstone, writer, group_events)
    _stale_member_epochs(cols, audit, keys, commit_rows, commit_keys, offset, tombstone, writer, epoch_events)
    _final_offsets(cols, audit, keys, commit_rows, commit_keys, by_key, values, good, writer)
    _transactions(cols, audit)
    shown = _reported(cols, audit, commit_rows)
    good_shown = good.copy()
    good_shown[good] = shown
    audit.history = _history(cols, audit.partition, keys, commit_rows[shown], commit_keys[shown], values, good_shown,
                             writer.take(np.flatnonzero(shown)))
    return audit.finish(cols.scan.problems + cols.scan.evidence)


def _transactions(cols: PartitionColumns, audit: PartitionAudit) -> None:
    """Transactional batches (rare: TxnOffsetCommit) one by one, for open transactions."""
    for batch in np.flatnonzero((cols.attributes & TRANSACTIONAL_FLAG) != 0):
        producer_id = (int(cols.producer_id[batch]) if cols.producer_id is not None
                       else struct.unpack_from(">q", cols.raw(int(batch)), _PRODUCER_ID_POS)[0])
        segment, position = cols.segment_position(int(batch))
        audit.transaction_batch(producer_id, bool(cols.control[batch]), int(cols.base_offset[batch]), segment,
                                position)


class _Keys:
    """The distinct keys of the records `rows`, each decoded once."""

    def __init__(self, cols: PartitionColumns, rows: np.ndarray):
        spans = cols.records
        encoded = pc.dictionary_encode(cols.views(spans.key_pos[rows], spans.key_len[rows]), null_encoding="encode")
        self.index = encoded.indices.to_numpy().astype(np.int64)
        self.raw: list[bytes | None] = encoded.dictionary.to_pylist()
        self.decoded: list[records.RecordKey | None] = []     # None: an unknown type, or undecodable
        problems: dict[int, str] = {}     # key index -> why it does not decode
        codes: list[int] = []
        for index, raw in enumerate(self.raw):
            try:
                key = records.deserialize_key(raw)
            except records.RecordDecodeError as e:
                problems[index] = str(e)
                key, code = None, _BAD
            else:
                code = _COMMIT if isinstance(key, OffsetCommitKey) else _GROUP if isinstance(key, GroupMetadataKey) \
                    else _OTHER if key is None or isinstance(key, records.AdoptedGroupKey) else _CONSUMER
            self.decoded.append(key)
            codes.append(code)
        self.kind = np.asarray(codes, np.int64)[self.index]
        self.errors = [(int(row), problems[k]) for row, k in zip(rows[self.kind == _BAD].tolist(),
                                                                 self.index[self.kind == _BAD].tolist(), strict=True)]
        # The groups of the keys, by name: offset keys and GroupMetadata keys meet here.
        self.group_ids: dict[str, int] = {}
        self.key_group = np.asarray([self._group_id(key) for key in self.decoded], np.int64)

    def key(self, index: int, kind: type[K]) -> K:
        """The decoded key at `index`, of the `kind` its code says."""
        key = self.decoded[index]
        if not isinstance(key, kind):
            raise TypeError(f"key {index} is {key!r}, not a {kind.__name__}")
        return key

    def consumer_key(self, index: int) -> ConsumerGroupKey:
        key = self.decoded[index]
        if not isinstance(key, ConsumerGroupKey):
            raise TypeError(f"key {index} is {key!r}, not a consumer group's")
        return key

    def raw_key(self, index: int) -> bytes:
        """The bytes of a key that decoded (a keyless record does not)."""
        raw = self.raw[index]
        if raw is None:
            raise TypeError(f"key {index} is null, which does not decode")
        return raw

    def _group_id(self, key) -> int:
        if not isinstance(key, (OffsetCommitKey, GroupMetadataKey)):
            return -1
        return self.group_ids.setdefault(key.group, len(self.group_ids))

    def column(self, key_index: np.ndarray, attribute: str, kind: pa.DataType) -> pa.Array:
        values = [getattr(k, attribute, None) if isinstance(k, OffsetCommitKey) else None for k in self.decoded]
        if kind == pa.string():
            return _strings(values, key_index)
        return pa.array(values, kind).take(pa.array(key_index))


class _Writers:
    """Who wrote each record (`audit.Writer` of its header block): per record, the
    index of its block, and each block's writer."""

    def __init__(self, block: np.ndarray, writers: list[Writer]):
        self.block = block
        self.writers = writers

    def take(self, rows: np.ndarray) -> _Writers:
        return _Writers(self.block[rows], self.writers)

    def writer(self, i: int) -> Writer:
        return self.writers[self.block[i]]

    def generation(self) -> np.ndarray:
        """Per record, the generation its writer gave (-1: none)."""
        given = np.asarray([-1 if w.generation is None else w.generation for w in self.writers], np.int64)
        return given[self.block]

    def column(self, field: str, kind: pa.DataType) -> pa.Array:
        values = [getattr(w, field) for w in self.writers]
        if kind == pa.string():
            return _strings(values, self.block)
        return pa.array(values, kind).take(pa.array(self.block))


def _strings(values: Sequence[str | None], codes: np.ndarray) -> pa.DictionaryArray:
    """`values[codes[i]]` per row (null for None or a code of -1), as a dictionary array
    whose dictionary holds each distinct string once: Parquet writes it as it is,
    without hashing every row's string."""
    distinct: dict[str, int] = {}
    remap = np.asarray([-1 if v is None else distinct.setdefault(v, len(distinct)) for v in values] + [-1], np.int32)
    index = remap[codes]
    return pa.DictionaryArray.from_arrays(pa.array(index, mask=index < 0), pa.array(list(distinct), pa.string()))


def _writers(cols: PartitionColumns) -> _Writers:
    return _Writers(cols.records.header_block, [Writer.from_headers(h) for h in cols.header_blocks])


class _CommitValues:
    """The values of the OffsetCommit records `rows` (keys `key_index`)."""

    def __init__(self, cols: PartitionColumns, rows: np.ndarray, key_index: np.ndarray, keys: _Keys):
        spans, buf = cols.records, cols.buf
        pos, length = spans.value_pos[rows], spans.value_len[rows]
        n = len(rows)
        self.tombstone = length < 0
        self.good = np.ones(n, bool)
        self.errors: list[tuple[int, str]] = []
        self.offset = np.zeros(n, np.int64)
        self.leader_epoch = np.full(n, -1, np.int64)
        self.commit_timestamp = np.zeros(n, np.int64)
        self.expire_timestamp = np.full(n, -1, np.int64)
        self.metadata = np.zeros(n, np.int64)             # codes into metadata_values; "" is 0
        self.metadata_values: list[str] = [""]
        self.topic_id = np.full(n, -1, np.int64)          # codes into topic_id_values; -1: none recorded
        self.topic_id_values: list[uuid.UUID] = []
        slow = np.ones(n, bool)
        size24 = np.flatnonzero(length == _V3_NO_METADATA.itemsize)
        value = structs(buf, pos[size24], _V3_NO_METADATA)
        plain = (value["version"] == _V3) & (value["metadata_length"] == 0)
        self._fast(size24[plain], value, plain, slow)
        size24 = size24[~plain]
        value = structs(buf, pos[size24], _V4_NO_METADATA)
        plain = (value["version"] == _V4) & (value["metadata_length"] == 1) & (value["tags"] == 0)
        self._fast(size24[plain], value, plain, slow)
        size42 = np.flatnonzero(length == _V4_TOPIC_ID.itemsize)
        value = structs(buf, pos[size42], _V4_TOPIC_ID)
        plain = ((value["version"] == _V4) & (value["metadata_length"] == 1) & (value["tags"] == 1)
                 & (value["tag"] == 0) & (value["tag_size"] == 16))
        with_id = size42[plain]
        self._fast(with_id, value, plain, slow)
        if with_id.size:
            # Few topics, many commits: each distinct id once.
            raw_ids = sliding_window_view(buf, 16)[pos[with_id] + _V4_TOPIC_ID_AT]
            distinct, inverse = np.unique(raw_ids, axis=0, return_inverse=True)
            ids = [uuid.UUID(bytes=row.tobytes()) for row in distinct]
            codes = np.asarray([self._topic_id_code(i) for i in ids] + [-1], np.int64)
            self.topic_id[with_id] = codes[inverse.reshape(-1)]
        slow &= ~self.tombstone
        metadata_codes = {"": 0}
        raw = buf.data
        for i in np.flatnonzero(slow).tolist():
            start = int(pos[i])
            try:
                decoded = records.deserialize_value(keys.key(int(key_index[i]), OffsetCommitKey),
                                                    bytes(raw[start:start + int(length[i])]))
            except records.RecordDecodeError as e:
                self.good[i] = False
                self.errors.append((int(rows[i]), str(e)))
                continue
            commit = value_as(OffsetCommitValue, decoded)
            self.offset[i] = commit.offset
            self.leader_epoch[i] = commit.leader_epoch
            self.commit_timestamp[i] = commit.commit_timestamp_ms
            self.expire_timestamp[i] = commit.expire_timestamp_ms
            self.topic_id[i] = self._topic_id_code(commit.topic_id)
            code = metadata_codes.setdefault(commit.metadata, len(metadata_codes))
            if code == len(self.metadata_values):
                self.metadata_values.append(commit.metadata)
            self.metadata[i] = code

    def _fast(self, rows: np.ndarray, value: dict[str, np.ndarray], plain: np.ndarray, slow: np.ndarray) -> None:
        """The values at `rows`, read as columns (`value`'s fields where `plain`)."""
        self.offset[rows] = value["offset"][plain]
        self.leader_epoch[rows] = value["leader_epoch"][plain]
        self.commit_timestamp[rows] = value["commit_timestamp"][plain]
        slow[rows] = False

    def _topic_id_code(self, topic_id: uuid.UUID | None) -> int:
        if topic_id is None or not topic_id.int:     # Kafka's zero uuid: none recorded
            return -1
        try:
            return self.topic_id_values.index(topic_id)
        except ValueError:
            self.topic_id_values.append(topic_id)
            return len(self.topic_id_values) - 1

    def value(self, i: int) -> OffsetCommitValue:
        code = int(self.topic_id[i])
        return OffsetCommitValue(int(self.offset[i]), int(self.leader_epoch[i]),
                                 self.metadata_values[self.metadata[i]], int(self.commit_timestamp[i]),
                                 int(self.expire_timestamp[i]), self.topic_id_values[code] if code >= 0 else None)


def _undecodable(audit: PartitionAudit, cols: PartitionColumns, row: int, error: str) -> None:
    if not audit.in_window(int(cols.timestamp[row])):
        return
    segment, position = cols.segment_position(int(cols.records.batch[row]))
    audit.findings.append(Finding(FindingType.UNDECODABLE_RECORD, audit.partition,
                                  record_offset=int(cols.offset[row]), timestamp_ms=int(cols.timestamp[row]),
                                  segment=segment, position=position, detail=error))


# (row, group id, value or None) of a GroupMetadata record
_GroupEvent = tuple[int, int, GroupMetadataValue | None]


def _group_metadata(cols: PartitionColumns, rows: np.ndarray, keys: _Keys,
                    audit: PartitionAudit) -> list[_GroupEvent]:
    """The event of each decodable GroupMetadata record, in offset order."""
    spans, raw = cols.records, cols.buf.data
    events = []
    for row, key_index in zip(rows.tolist(), keys.index[keys.kind == _GROUP].tolist(), strict=True):
        key = keys.key(key_index, GroupMetadataKey)
        length = int(spans.value_len[row])
        value = None
        if length >= 0:
            start = int(spans.value_pos[row])
            try:
                value = value_as(GroupMetadataValue, records.deserialize_value(key, bytes(raw[start:start + length])))
            except records.RecordDecodeError as e:
                _undecodable(audit, cols, row, str(e))
                continue
        events.append((row, keys.group_ids[key.group], value))
    return events


def _replay_groups(cols: PartitionColumns, rows: np.ndarray, keys: _Keys, group_events: list[_GroupEvent],
                   audit: PartitionAudit) -> list[tuple[int, str, str, MemberEpoch | None]]:
    """GroupMetadata, KIP-848 consumer groups' records and the other protocols' records,
    replayed in offset order as the record-by-record audit does (they are few). Returns
    the members' epochs as their current-assignment records set them: (row, group, member
    id, epochs or None for a tombstone), in offset order."""
    spans, raw = cols.records, cols.buf.data
    others = rows[keys.kind == _OTHER]
    audit.skipped_records += len(others)
    names = {gid: name for name, gid in keys.group_ids.items()}
    # (row, kind, index into that kind's list): rows are distinct, so sorted by row.
    steps = [(row, _GROUP, i) for i, (row, _gid, _value) in enumerate(group_events)]
    other_keys = [keys.raw_key(k) for k in keys.index[keys.kind == _OTHER].tolist()]
    steps += [(row, _OTHER, i) for i, row in enumerate(others.tolist())]
    consumer = keys.kind == _CONSUMER
    consumer_keys = [keys.consumer_key(k) for k in keys.index[consumer].tolist()]
    steps += [(row, _CONSUMER, i) for i, row in enumerate(rows[consumer].tolist())]
    steps.sort()
    epochs: list[tuple[int, str, str, MemberEpoch | None]] = []
    for row, kind, i in steps:
        offset = int(cols.offset[row])
        tombstone = bool(spans.value_len[row] < 0)
        if kind == _GROUP:
            _row, gid, group_value = group_events[i]
            audit.group_metadata(names[gid], group_value, offset, int(cols.timestamp[row]))
        elif kind == _OTHER:
            audit.other_record(other_keys[i], tombstone, offset)
        else:
            key = consumer_keys[i]
            value = None
            if not tombstone:
                start = int(spans.value_pos[row])
                try:
                    value = consumer_group_value(records.deserialize_value(
                        key, bytes(raw[start:start + int(spans.value_len[row])])))
                except records.RecordDecodeError as e:
                    _undecodable(audit, cols, row, str(e))
                    continue
            audit.consumer_group_record(key, value, offset)
            if isinstance(key, records.ConsumerGroupCurrentMemberAssignmentKey):
                epochs.append((row, key.group, key.member_id, audit.member_epochs.get((key.group, key.member_id))))
    return epochs


def _regressions(cols, audit, keys, rows, key_index, order, offset, tombstone, writer: _Writers) -> None:
    k, off, tomb = key_index[order], offset[order], tombstone[order]
    hit = np.flatnonzero((k[1:] == k[:-1]) & ~tomb[1:] & ~tomb[:-1] & (off[1:] < off[:-1])
                         & _reported(cols, audit, rows[order[1:]]))
    for at in hit.tolist():
        i = int(order[at + 1])
        previous = int(off[at])
        _commit_finding(cols, audit, keys, FindingType.OFFSET_REGRESSION, rows, key_index, offset, writer, i,
                        previous_offset=previous, detail=f"{previous} -> {int(offset[i])}")


def _stale_generations(cols, audit, keys, rows, key_index, offset, tombstone, writer: _Writers,
                       group_events: list) -> None:
    if not group_events:
        return
    commit_generation = writer.generation()
    candidates = np.flatnonzero(~tombstone & (commit_generation >= 0) & _reported(cols, audit, rows))
    if not candidates.size:
        return
    event_row = np.asarray([row for row, _g, _v in group_events], np.int64)
    event_group = np.asarray([gid for _r, gid, _v in group_events], np.int64)
    event_generation = np.asarray([-1 if v is None else v.generation for _r, _g, v in group_events], np.int64)
    event_live = np.asarray([v is not None for _r, _g, v in group_events], bool)
    record_offset = cols.offset
    span = int(record_offset.max()) + 1 if len(record_offset) else 1
    if (len(keys.group_ids) + 1) * span >= 2**62:
        raise ValueError("offsets too large for the columnar audit: use the records scanner")
    event_at = event_group * span + record_offset[event_row]
    order = np.argsort(event_at, kind="stable")
    event_at, event_group = event_at[order], event_group[order]
    event_generation, event_live, event_row = event_generation[order], event_live[order], event_row[order]
    commit_group = keys.key_group[key_index[candidates]]
    at = np.searchsorted(event_at, commit_group * span + record_offset[rows[candidates]], side="left") - 1
    found = at >= 0
    at = np.where(found, at, 0)
    found &= (event_group[at] == commit_group) & event_live[at]
    stale = found & (commit_generation[candidates] < event_generation[at])
    for c, e in zip(candidates[stale].tolist(), at[stale].tolist(), strict=True):
        _commit_finding(cols, audit, keys, FindingType.STALE_GENERATION_COMMIT, rows, key_index, offset, writer, c,
                        detail=f"generation {int(commit_generation[c])}, group at {int(event_generation[e])} "
                               f"since offset {int(record_offset[event_row[e]])}")


def _stale_member_epochs(cols, audit, keys, rows, key_index, offset, tombstone, writer: _Writers,
                         epoch_events: list[tuple[int, str, str, MemberEpoch | None]]) -> None:
    """Commits whose member (group, member id header) had a newer epoch at the time."""
    member_code: dict[str, int] = {}
    block_member = np.asarray([member_code.setdefault(w.member_id, len(member_code)) if w.member_id else -1
                               for w in writer.writers], np.int64)
    # A (group, member) as one number (group id from the keys, member id code), then as
    # its index among the pairs that have epochs: few, so the as-of keys stay small.
    width = len(member_code) + 1
    events = [(row, keys.group_ids[group] * width + member_code[member], epochs)
              for row, group, member, epochs in epoch_events
              if group in keys.group_ids and member in member_code]
    if not events:
        return
    event_key = np.asarray([key for _row, key, _e in events], np.int64)
    pairs = np.unique(event_key)
    commit_epoch = writer.generation()
    commit_member = block_member[writer.block]
    commit_key = keys.key_group[key_index] * width + commit_member
    commit_pair = np.minimum(np.searchsorted(pairs, commit_key), len(pairs) - 1)
    candidates = np.flatnonzero(~tombstone & (commit_epoch >= 0) & (commit_member >= 0)
                                & (pairs[commit_pair] == commit_key) & _reported(cols, audit, rows))
    if not candidates.size:
        return
    record_offset = cols.offset
    span = int(record_offset.max()) + 1
    if len(pairs) * span >= 2**62:
        raise ValueError("offsets too large for the columnar audit: use the records scanner")
    event_row = np.asarray([row for row, _key, _e in events], np.int64)
    event_pair = np.searchsorted(pairs, event_key)
    event_epochs = [e for _row, _key, e in events]
    event_at = event_pair * span + record_offset[event_row]
    order = np.argsort(event_at, kind="stable")
    event_at, event_pair = event_at[order], event_pair[order]
    wanted = commit_pair[candidates]
    at = np.searchsorted(event_at, wanted * span + record_offset[rows[candidates]], side="left") - 1
    found = at >= 0
    at = np.where(found, at, 0)
    found &= event_pair[at] == wanted
    for c, e in zip(candidates[found].tolist(), order[at[found]].tolist(), strict=True):
        member = event_epochs[e]
        epoch = int(commit_epoch[c])
        if member is not None and member.refuses(epoch):
            _commit_finding(cols, audit, keys, FindingType.STALE_GENERATION_COMMIT, rows, key_index, offset, writer,
                            c, detail=stale_epoch_detail(epoch, member))


def _reported(cols: PartitionColumns, audit: PartitionAudit, rows: np.ndarray) -> np.ndarray:
    if audit.since_ms is None:
        return np.ones(len(rows), bool)
    return cols.timestamp[rows] >= audit.since_ms


def _commit_finding(cols, audit, keys, kind, rows, key_index, offset, writer: _Writers, i: int,
                    previous_offset: int | None = None, detail: str = "") -> None:
    key = keys.decoded[key_index[i]]
    w = writer.writer(i)
    row = int(rows[i])
    audit.findings.append(Finding(
        kind, audit.partition, key.group, key.topic, key.partition, int(cols.offset[row]), int(offset[i]),
        previous_offset, int(cols.timestamp[row]), w.member_id, w.generation, w.client_id, w.client_host,
        detail=detail))


def _final_offsets(cols, audit, keys, rows, key_index, order, values: _CommitValues, good, writer: _Writers) -> None:
    last = np.ones(len(order), bool)
    last[:-1] = key_index[order][1:] != key_index[order][:-1]
    value_index = np.flatnonzero(good)
    for i in np.sort(order[last]).tolist():
        v = int(value_index[i])
        if values.tombstone[v]:
            continue
        key = keys.decoded[key_index[i]]
        row = int(rows[i])
        audit.offsets[(key.group, key.topic, key.partition)] = Committed(
            values.value(v), int(cols.offset[row]), int(cols.timestamp[row]), writer.writer(i))


def _history(cols, partition, keys, rows, key_index, values: _CommitValues, good, writer: _Writers) -> dict:
    tomb = values.tombstone[good]

    def nullable(array: np.ndarray, kind: pa.DataType) -> pa.Array:
        return pa.array(array[good], kind, mask=tomb)

    metadata = _strings(values.metadata_values, np.where(tomb, -1, values.metadata[good]))
    return {
        "log_partition": pa.array(np.full(len(rows), partition, np.int32)),
        "record_offset": pa.array(cols.offset[rows]),
        "timestamp_ms": pa.array(cols.timestamp[rows]),
        "group": keys.column(key_index, "group", pa.string()),
        "topic": keys.column(key_index, "topic", pa.string()),
        "partition": keys.column(key_index, "partition", pa.int32()),
        "offset": nullable(values.offset, pa.int64()),
        "leader_epoch": nullable(values.leader_epoch, pa.int32()),
        "metadata": metadata,
        "commit_timestamp_ms": nullable(values.commit_timestamp, pa.int64()),
        "expire_timestamp_ms": nullable(values.expire_timestamp, pa.int64()),
        "member_id": writer.column("member_id", pa.string()),
        "generation": writer.column("generation", pa.int32()),
        "client_id": writer.column("client_id", pa.string()),
        "client_host": writer.column("client_host", pa.string()),
    }
