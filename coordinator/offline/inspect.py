"""`kgc inspect DATA_DIR`: what a data dir holds, read without changing a byte.

For every `__consumer_offsets-<p>/` directory it walks the segments with the store's own
reader (`storage.format.BatchReader`), decodes every key and value with
`coordinator.records` (the loader's decoder), and prints batches, records and headers;
then it folds the records, in offset order, into the materialized state per group, as
the loader's replay does: the committed offset per topic-partition (a tombstone removes
it) and the last GroupMetadata (a tombstone removes the group, not its offsets).

A walk that stops before the end of a segment is judged as recovery would judge it at
the next open (`storage.partition_log`): a torn tail if it is the active segment, the
reason is one a cut write leaves and no sound batch follows; corruption otherwise.
Inspect reports both and repairs neither (kgc's recovery saves a torn tail as
`<segment>.torn-N` and truncates; those files are listed with what their bytes are).

Exit status: 0 when every segment is whole or ends in a torn tail, 1 when any segment
is corrupt (kgc would refuse that partition), 2 for a bad command line.

Like `coordinator.offline`, this module may import the pure `coordinator.records` and
`coordinator.partitioning`, and KIP-848 groups are materialized by the coordinator's own
replay (`coordinator.group.consumer.group`); nothing else from `coordinator`.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coordinator import records
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.errors import CorruptStateError
from coordinator.offline.record_values import value_as
from coordinator.partitioning import partition_for
from storage.api import StoredBatch, StoredRecord
from storage.file_store import TOPIC, partition_dirs
from storage.format import BatchDecodeError, BatchReader, Tail, decode_batch, judge_tail
from storage.partition_log import PartitionLog
from storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, TORN_SUFFIX, SegmentIO, mapped, parse_segment_name

DEFAULT_NUM_PARTITIONS = 50


# -- what a data dir holds ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InspectedRecord:
    offset: int
    timestamp_ms: int
    key: records.RecordKey | None          # None: not decoded (an unknown type, or `error`)
    value: records.RecordValue | None      # None: a tombstone, or not decoded
    raw_key: bytes | None
    raw_value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    # Why a record of a known type did not decode: the loader would refuse the partition.
    error: str | None = None

    @property
    def group(self) -> str | None:
        return self.key.group if self.key is not None else None


@dataclass(frozen=True, slots=True)
class InspectedBatch:
    position: int
    size_bytes: int
    batch: StoredBatch
    records: tuple[InspectedRecord, ...]


@dataclass(frozen=True, slots=True)
class Damage:
    """Where a segment's walk stopped, and how recovery would treat it."""
    position: int
    reason: str
    torn_tail: bool          # recovery would save and truncate it; otherwise it refuses
    tail_bytes: int


@dataclass(frozen=True, slots=True)
class ExtraFile:
    name: str
    size_bytes: int
    kind: str                # "torn tail", "unfinished compaction", "pending swap"
    scan: str                # what the bytes are, walked as batches


@dataclass(slots=True)
class InspectedSegment:
    name: str
    base_offset: int
    size_bytes: int
    active: bool
    batches: list[InspectedBatch] = field(default_factory=list)
    damage: Damage | None = None


@dataclass(slots=True)
class InspectedPartition:
    partition: int
    segments: list[InspectedSegment] = field(default_factory=list)
    extra_files: list[ExtraFile] = field(default_factory=list)
    # Closed segments against what their manifest recorded when they closed (None: sound).
    integrity: str | None = None

    @property
    def end_offset(self) -> int:
        last = [b.batch.last_offset for s in self.segments for b in s.batches]
        return max(last, default=-1) + 1


@dataclass(slots=True)
class MaterializedGroup:
    group: str
    partition: int
    offsets: dict[tuple[str, int], records.OffsetCommitValue] = field(default_factory=dict)
    metadata: records.GroupMetadataValue | None = None
    metadata_offset: int = -1
    # where each offset's latest record came from, when kgc adopted it: (source, at ms)
    adopted: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    consumer: ConsumerGroup | None = None      # a KIP-848 consumer group, replayed
    consumer_error: str | None = None          # a record its replay refused


@dataclass(slots=True)
class Inspection:
    data_dir: Path
    partitions: list[InspectedPartition]
    groups: dict[str, MaterializedGroup]

    @property
    def corrupt(self) -> bool:
        return any(p.integrity is not None for p in self.partitions) or any(
                   (s.damage is not None and not s.damage.torn_tail)
                   or any(r.error is not None for b in s.batches for r in b.records)
                   for p in self.partitions for s in p.segments)


# -- reading -------------------------------------------------------------------------------


def _inspect_record(stored: StoredRecord) -> InspectedRecord:
    key = value = None
    error = None
    try:
        decoded = records.deserialize(stored.key, stored.value)
    except records.RecordDecodeError as e:
        error = str(e)
    else:
        if decoded is not None:
            key, value = decoded
    return InspectedRecord(stored.offset, stored.timestamp_ms, key, value, stored.key, stored.value,
                           stored.headers, error)


def _inspect_segment(path: Path, base_offset: int, min_offset: int, active: bool) -> InspectedSegment:
    segment = InspectedSegment(path.name, base_offset, path.stat().st_size, active)
    with mapped(path) as buf:
        reader = BatchReader(buf, 0, max(min_offset, base_offset))
        for position, header in reader.headers():
            try:
                batch = decode_batch(buf, position, header)
            except BatchDecodeError as e:
                segment.damage = Damage(position, f"records do not decode: {e.detail}", False,
                                        len(buf) - position)
                return segment
            segment.batches.append(InspectedBatch(
                position, header.size, batch, tuple(_inspect_record(r) for r in batch.records)))
        # An active segment's zero tail (preallocated) is the end of its log, no damage.
        stop = reader.stop
        if stop is not None:
            judgement = judge_tail(buf, stop, reader.next_offset, active)
            if judgement.verdict is not Tail.END:
                segment.damage = Damage(stop.position, judgement.describe(stop), judgement.verdict is Tail.TORN,
                                        len(buf) - stop.position)
    return segment


def _describe_bytes(path: Path) -> str:
    with mapped(path) as buf:
        reader = BatchReader(buf).scan()
        whole = f"{reader.end} bytes of whole batches" if reader.end else "no whole batch"
        return whole if reader.stop is None else f"{whole}, then {reader.stop}"


def _extra_kind(name: str) -> str | None:
    stem, _dot, _rest = name.partition(".")
    if parse_segment_name(stem + ".log") is None:
        return None
    if TORN_SUFFIX in name:
        return "torn tail"
    if name.endswith(CLEANED_SUFFIX):
        return "unfinished compaction"
    if name.endswith(SWAP_SUFFIX):
        return "pending swap"
    return None


def inspect_partition(directory: Path, partition: int) -> InspectedPartition:
    names = sorted(os.listdir(directory))
    bases = sorted(b for b in map(parse_segment_name, names) if b is not None)
    result = InspectedPartition(partition)
    damage = PartitionLog(directory, 1, SegmentIO()).check()
    result.integrity = None if damage is None else str(damage)
    next_offset = 0
    for i, base in enumerate(bases):
        path = directory / f"{base:020d}.log"
        segment = _inspect_segment(path, base, next_offset, active=i == len(bases) - 1)
        result.segments.append(segment)
        if segment.batches:
            next_offset = segment.batches[-1].batch.last_offset + 1
    for name in names:
        kind = _extra_kind(name)
        if kind is not None:
            path = directory / name
            result.extra_files.append(ExtraFile(name, path.stat().st_size, kind, _describe_bytes(path)))
    return result


def materialize(partitions: list[InspectedPartition], group: str | None = None) -> dict[str, MaterializedGroup]:
    """The loader's replay, reduced to what it persists: offsets and the last GroupMetadata."""
    groups: dict[str, MaterializedGroup] = {}
    for part in partitions:
        for segment in part.segments:
            for batch in segment.batches:
                if batch.batch.is_control:
                    continue
                for rec in batch.records:
                    key = rec.key
                    if key is None or (group is not None and key.group != group):
                        continue
                    state = groups.setdefault(key.group, MaterializedGroup(key.group, part.partition))
                    if isinstance(key, records.OffsetCommitKey):
                        tp = (key.topic, key.partition)
                        adoption = records.adoption_of(rec.headers)
                        if adoption is None:
                            state.adopted.pop(tp, None)
                        else:
                            state.adopted[tp] = adoption
                        commit = value_as(records.OffsetCommitValue, rec.value)
                        if commit is None:
                            state.offsets.pop(tp, None)
                        else:
                            state.offsets[tp] = commit
                    elif isinstance(key, records.ConsumerGroupKey):
                        _replay_consumer(state, key, rec)
                    elif isinstance(key, records.GroupMetadataKey):
                        state.metadata = value_as(records.GroupMetadataValue, rec.value)
                        state.metadata_offset = rec.offset
    return {g: s for g, s in sorted(groups.items())
            if s.offsets or s.metadata is not None or s.consumer is not None or s.consumer_error}


def _replay_consumer(state: MaterializedGroup, key: records.ConsumerGroupKey, rec: InspectedRecord) -> None:
    if isinstance(key, records.ConsumerGroupMetadataKey) and rec.value is None:
        state.consumer = None
        return
    if state.consumer is None:
        if rec.value is None:
            return
        state.consumer = ConsumerGroup(state.group)
    try:
        state.consumer.replay(key, rec.value)
    except CorruptStateError as exc:
        state.consumer_error = f"offset {rec.offset}: {exc}"


def inspect_data_dir(data_dir: str | Path, *, group: str | None = None, partition: int | None = None,
                     num_partitions: int = DEFAULT_NUM_PARTITIONS) -> Inspection:
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"no data dir at {data_dir}")
    dirs = partition_dirs(data_dir)
    if group is not None:
        wanted = partition_for(group, num_partitions)
        if partition is not None and partition != wanted:
            raise ValueError(f"group {group!r} lives in partition {wanted}, not {partition}")
        partition = wanted
    if partition is not None:
        dirs = {p: d for p, d in dirs.items() if p == partition}
    partitions = [inspect_partition(d, p) for p, d in dirs.items()]
    return Inspection(data_dir, partitions, materialize(partitions, group))


# -- rendering -------------------------------------------------------------------------


def _header_value(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()


def _member_json(m: records.MemberMetadata) -> dict[str, Any]:
    return {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "session_timeout_ms": m.session_timeout_ms, "subscription_bytes": len(m.subscription),
            "assignment_bytes": len(m.assignment)}


def _metadata_json(v: records.GroupMetadataValue) -> dict[str, Any]:
    return {"protocol_type": v.protocol_type, "generation": v.generation, "protocol": v.protocol,
            "leader": v.leader, "current_state_timestamp_ms": v.current_state_timestamp_ms,
            "members": [_member_json(m) for m in v.members]}


def _offset_json(v: records.OffsetCommitValue) -> dict[str, Any]:
    return {"offset": v.offset, "leader_epoch": v.leader_epoch, "metadata": v.metadata,
            "commit_timestamp_ms": v.commit_timestamp_ms, "expire_timestamp_ms": v.expire_timestamp_ms,
            **({} if v.topic_id is None else {"topic_id": str(v.topic_id)})}


def _key_json(key: records.RecordKey) -> dict[str, Any]:
    if isinstance(key, records.OffsetCommitKey):
        return {"type": "OffsetCommitKey", "group": key.group, "topic": key.topic, "partition": key.partition}
    if isinstance(key, records.ConsumerGroupKey | records.AdoptedGroupKey):
        return {"type": type(key).__name__, **dataclasses.asdict(key)}
    return {"type": "GroupMetadataKey", "group": key.group}


def _plain(value: Any) -> Any:
    """A record value's fields as JSON-friendly values (uuids as strings, bytes as base64,
    nested records such as a classic member's metadata as objects)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value) if isinstance(value, uuid.UUID) else value


def _value_json(value: records.RecordValue) -> dict[str, Any]:
    if isinstance(value, records.OffsetCommitValue):
        return {"type": "OffsetCommitValue", **_offset_json(value)}
    if isinstance(value, records.ConsumerGroupValue | records.AdoptedGroupValue):
        return {"type": type(value).__name__,
                **{f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    return {"type": "GroupMetadataValue", **_metadata_json(value)}


def _partitions_json(assignment) -> dict[str, list[int]]:
    return {str(topic_id): sorted(partitions) for topic_id, partitions in sorted(assignment.items(),
                                                                               key=lambda i: i[0].bytes)}


def _consumer_json(group: ConsumerGroup) -> dict[str, Any]:
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch, "state": group.state,
            "metadata_hash": group.metadata_hash,
            "regexes": {rx: list(v.topics) for rx, v in sorted(group.regexes.items())},
            "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                         "protocol": "classic" if m.uses_classic_protocol else "consumer",
                         "member_epoch": m.member_epoch, "state": m.state.name,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "subscribed_topic_regex": m.subscribed_topic_regex,
                         "assigned": _partitions_json(m.assigned),
                         "revoking": _partitions_json(m.pending_revocation),
                         "target": _partitions_json(group.target.get(m.member_id, {}))}
                        for m in sorted(group.members.values(), key=lambda m: m.member_id)]}


def _record_json(rec: InspectedRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"offset": rec.offset, "timestamp_ms": rec.timestamp_ms}
    if rec.key is None:
        out["raw_key"] = rec.raw_key.hex() if rec.raw_key is not None else None
        out["raw_value"] = rec.raw_value.hex() if rec.raw_value is not None else None
        out["error"] = rec.error or "unknown record type"
    else:
        out["key"] = _key_json(rec.key)
        out["value"] = None if rec.value is None else _value_json(rec.value)
    out["headers"] = [[name, _header_value(value)] for name, value in rec.headers]
    return out


def _visible(records_: tuple[InspectedRecord, ...], group: str | None) -> list[InspectedRecord]:
    return [r for r in records_ if group is None or r.group == group]


def to_json(inspection: Inspection, *, group: str | None = None, state_only: bool = False) -> dict[str, Any]:
    partitions = []
    for part in inspection.partitions:
        segments = []
        for s in part.segments:
            seg: dict[str, Any] = {"name": s.name, "base_offset": s.base_offset, "size_bytes": s.size_bytes,
                                   "active": s.active, "batch_count": len(s.batches)}
            if not state_only:
                seg["batches"] = [{
                    "position": b.position, "size_bytes": b.size_bytes, "base_offset": b.batch.base_offset,
                    "last_offset": b.batch.last_offset, "max_timestamp_ms": b.batch.max_timestamp_ms,
                    "attributes": b.batch.attributes, "producer_id": b.batch.producer_id,
                    "records": [_record_json(r) for r in _visible(b.records, group)],
                } for b in s.batches if group is None or _visible(b.records, group)]
            seg["damage"] = None if s.damage is None else {
                "position": s.damage.position, "reason": s.damage.reason, "torn_tail": s.damage.torn_tail,
                "tail_bytes": s.damage.tail_bytes}
            segments.append(seg)
        partitions.append({"partition": part.partition, "end_offset": part.end_offset, "segments": segments,
                           "integrity": part.integrity,
                           "extra_files": [{"name": f.name, "size_bytes": f.size_bytes, "kind": f.kind,
                                            "scan": f.scan} for f in part.extra_files]})
    groups = {name: {
        "partition": g.partition,
        "offsets": [{"topic": t, "partition": p, **_offset_json(v), "origin": records.origin_view(g.adopted.get((t, p)))}
                    for (t, p), v in sorted(g.offsets.items())],
        "group_metadata": None if g.metadata is None else {"offset": g.metadata_offset,
                                                           **_metadata_json(g.metadata)},
        # KIP-848 groups only: their replayed state, or the record that replay refused.
        **({} if g.consumer is None else {"consumer_group": _consumer_json(g.consumer)}),
        **({} if g.consumer_error is None else {"consumer_group_error": g.consumer_error}),
    } for name, g in inspection.groups.items()}
    return {"data_dir": str(inspection.data_dir), "corrupt": inspection.corrupt,
            "partitions": partitions, "groups": groups}


def _origin_text(adoption: tuple[str, int] | None) -> str:
    return "" if adoption is None else f" (adopted from {adoption[0]} at {_when(adoption[1])})"


def _when(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fields(d: dict[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in d.items())


def _record_line(rec: InspectedRecord) -> str:
    if rec.key is None:
        raw_value = "null" if rec.raw_value is None else f"{len(rec.raw_value)} bytes"
        line = f"offset {rec.offset}: ? key 0x{(rec.raw_key or b'').hex()} value {raw_value} ({rec.error or 'unknown record type'})"
    else:
        key = _key_json(rec.key)
        line = f"offset {rec.offset}: {key.pop('type')} {_fields(key)} -> "
        if rec.value is None:
            line += "tombstone"
        elif isinstance(rec.value, records.OffsetCommitValue):
            line += f"OffsetCommitValue {_fields(_offset_json(rec.value))}"
        elif isinstance(rec.value, records.ConsumerGroupValue | records.AdoptedGroupValue):
            value = _value_json(rec.value)
            line += f"{value.pop('type')} {_fields(value)}"
        else:
            meta = _metadata_json(rec.value)
            members = meta.pop("members")
            line += f"GroupMetadataValue {_fields(meta)} members={len(members)}"
    if rec.headers:
        line += "  [" + " ".join(f"{n}={_header_value(v)}" for n, v in rec.headers) + "]"
    return line


def render_text(inspection: Inspection, *, group: str | None = None, state_only: bool = False) -> str:
    out = [f"data dir {inspection.data_dir}: {len(inspection.partitions)} partition directories"]
    for part in inspection.partitions:
        count = sum(len(s.batches) for s in part.segments)
        if (not count and not part.extra_files and part.integrity is None
                and all(s.damage is None for s in part.segments)):
            continue
        out.append(f"{TOPIC}-{part.partition}: end offset {part.end_offset}")
        if part.integrity is not None:
            out.append(f"  DAMAGED: kgc refuses this partition until `kgc repair --accept-loss "
                       f"{part.partition}`: {part.integrity}")
        for s in part.segments:
            records_ = sum(len(b.records) for b in s.batches)
            role = "active" if s.active else "closed"
            out.append(f"  {s.name} ({role}): {s.size_bytes} bytes, {len(s.batches)} batches, {records_} records")
            for b in [] if state_only else s.batches:
                shown = _visible(b.records, group)
                if group is not None and not shown:
                    continue
                flags = [name for name, on in (("control", b.batch.is_control),
                                               ("transactional", b.batch.is_transactional)) if on]
                out.append(f"    batch {b.batch.base_offset}..{b.batch.last_offset} at byte {b.position}, "
                           f"{b.size_bytes} bytes, {len(b.records)} records, "
                           f"{_when(b.batch.max_timestamp_ms)}{' ' + ' '.join(flags) if flags else ''}")
                out.extend("      " + _record_line(r) for r in shown)
            if s.damage is not None:
                verdict = ("torn tail: recovery will save it as .torn-N and truncate" if s.damage.torn_tail
                           else "CORRUPT: kgc refuses this partition")
                out.append(f"    {verdict}; {s.damage.tail_bytes} bytes from byte {s.damage.position}: "
                           f"{s.damage.reason}")
        for f in part.extra_files:
            out.append(f"  {f.name} ({f.kind}): {f.size_bytes} bytes, {f.scan}")
    out.append(f"groups: {len(inspection.groups)}")
    for name, g in inspection.groups.items():
        out.append(f"  {name!r} (partition {g.partition})")
        if g.consumer is not None:
            view = _consumer_json(g.consumer)
            members = view.pop("members")
            out.append(f"    consumer group (KIP-848): {_fields(view)}")
            for m in members:
                out.append(f"      member {_fields(m)}")
        if g.consumer_error is not None:
            out.append(f"    consumer group records refused: {g.consumer_error}")
        if g.metadata is None:
            if g.consumer is None:
                out.append("    no GroupMetadata")
        else:
            meta = _metadata_json(g.metadata)
            members = meta.pop("members")
            meta["current_state_timestamp_ms"] = _when(meta["current_state_timestamp_ms"])
            out.append(f"    GroupMetadata at offset {g.metadata_offset}: {_fields(meta)}")
            for m in members:
                out.append(f"      member {_fields(m)}")
        for (topic, p), v in sorted(g.offsets.items()):
            out.append(f"    {topic}-{p}: offset {v.offset} leader_epoch {v.leader_epoch} "
                       f"metadata {v.metadata!r} committed {_when(v.commit_timestamp_ms)}"
                       + (f" expires {_when(v.expire_timestamp_ms)}" if v.expire_timestamp_ms >= 0 else "")
                       + _origin_text(g.adopted.get((topic, p))))
    if inspection.corrupt:
        out.append("CORRUPT: a segment is damaged beyond a torn tail, or a record does not decode")
    return "\n".join(out) + "\n"


# -- command line ------------------------------------------------------------------------


def add_inspect_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("inspect", help="print what a data dir holds (read-only)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir", metavar="DATA_DIR", help="the data dir (or a copy of it); a live one is fine")
    p.add_argument("--group", default=None, help="only this group's partition, records and state")
    p.add_argument("--partition", type=int, default=None, help="only this partition")
    p.add_argument("--num-partitions", type=int, default=DEFAULT_NUM_PARTITIONS,
                   help="partitions of the log, for --group (default %(default)s)")
    p.add_argument("--state-only", action="store_true", help="segments and group state, no batches")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    # `kgc`'s main configures logging from log_level; inspect reports on stdout instead.
    p.set_defaults(handler=run_inspect, log_level="WARNING")
    return p


def run_inspect(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    try:
        inspection = inspect_data_dir(args.data_dir, group=args.group, partition=args.partition,
                                      num_partitions=args.num_partitions)
    except (FileNotFoundError, ValueError) as e:
        print(f"kgc inspect: {e}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(to_json(inspection, group=args.group, state_only=args.state_only), out, indent=2)
        out.write("\n")
    else:
        out.write(render_text(inspection, group=args.group, state_only=args.state_only))
    return 1 if inspection.corrupt else 0
