"""`kgc import --kafka-log DIR --data-dir KGC_DIR`: groups from a copy of a Kafka broker's
`__consumer_offsets-N` directories, adopted into kgc's data dir (kgc stopped).

The segments are read as `kgc inspect` reads them (same format as kgc's own); damage
other than a torn tail stops the import, naming it. The records are replayed as Kafka's
coordinator loads them:
- plain batches apply in log order: offset commits and their tombstones, GroupMetadata
  and its tombstone (a deleted group: its protocol type goes; offsets go only with their
  own tombstones, as DeleteGroups writes them);
- transactional offset commits wait per producer id for their transaction marker (a
  control batch): COMMIT applies each one unless a later plain commit of the same
  partition came after it in the log; ABORT drops them;
- KIP-848, share and streams group records are skipped and counted: their groups'
  offsets are still imported, and their members rejoin kgc as they would any coordinator.
What is left, per group, is adopted through kgc's own partition write path
(`GroupShard.adopt`, records stamped adopted_from=kafka-log and the time); a group kgc's
log already has is left alone and reported. Without `--apply` nothing is written; with it,
the partitions written are locked (`storage.dir_lock`): a kgc serving one refuses the import.
"""

from __future__ import annotations

import asyncio
import struct
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from coordinator import records
from coordinator.group.adopt import AdoptedOffset
from coordinator.group.config import GroupConfig
from coordinator.group.shard import group_shard_factory
from coordinator.offline.inspect import inspect_partition
from coordinator.offline.record_values import value_as
from coordinator.partitioning import partition_for
from coordinator.runtime.api import WriteOp
from coordinator.runtime.runtime import CoordinatorRuntime
from storage.clock import wall_clock_ms
from storage.dir_lock import DataDirInUse
from storage.file_store import FileLogStore, partition_dirs

SOURCE = "kafka-log"
_CONTROL_KEY = struct.Struct(">hh")   # version, type
_COMMIT_MARKER = 1


class KafkaLogError(Exception):
    """The log cannot be imported as it is; the message names where and why."""


@dataclass(slots=True)
class ImportedGroup:
    group_id: str
    protocol_type: str = ""
    # (topic, partition) -> (log offset of the record, its value)
    offsets: dict[tuple[str, int], tuple[int, records.OffsetCommitValue]] = field(default_factory=dict)

    def adopted_offsets(self) -> tuple[AdoptedOffset, ...]:
        return tuple(AdoptedOffset(t, p, v.offset, v.leader_epoch, v.metadata)
                     for (t, p), (_, v) in sorted(self.offsets.items()))


@dataclass(slots=True)
class KafkaLogState:
    groups: dict[str, ImportedGroup] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)   # record kind -> count
    transactions: Counter = field(default_factory=Counter)  # "committed" / "aborted" -> markers


def read_kafka_log(kafka_dir: str | Path) -> KafkaLogState:
    kafka_dir = Path(kafka_dir)
    dirs = partition_dirs(kafka_dir)
    if not dirs:
        raise KafkaLogError(f"no __consumer_offsets-N directories in {kafka_dir}")
    state = KafkaLogState()
    for partition, directory in dirs.items():
        _replay_partition(state, directory, partition)
    state.groups = {g: s for g, s in sorted(state.groups.items()) if s.offsets or s.protocol_type}
    return state


def _replay_partition(state: KafkaLogState, directory: Path, partition: int) -> None:
    inspected = inspect_partition(directory, partition)
    pending: dict[int, dict[tuple[str, str, int], tuple[int, records.OffsetCommitValue | None]]] = {}
    for segment in inspected.segments:
        if segment.damage is not None and not segment.damage.torn_tail:
            raise KafkaLogError(f"{directory.name}/{segment.name}: damaged at byte {segment.damage.position}: "
                                f"{segment.damage.reason}")
        for batch in segment.batches:
            stored = batch.batch
            if stored.is_control:
                for record in batch.records:
                    _end_transaction(state, pending.pop(stored.producer_id, {}), record.raw_key)
                continue
            for record in batch.records:
                if record.error is not None:
                    raise KafkaLogError(f"{directory.name}/{segment.name}: record at offset {record.offset} "
                                        f"does not decode: {record.error}")
                key = record.key
                if isinstance(key, records.OffsetCommitKey):
                    commit = value_as(records.OffsetCommitValue, record.value)
                    if stored.is_transactional:
                        pending.setdefault(stored.producer_id, {})[(key.group, key.topic, key.partition)] = (
                            record.offset, commit)
                    else:
                        _apply_offset(state, key.group, key.topic, key.partition, record.offset, commit)
                elif isinstance(key, records.GroupMetadataKey):
                    group = state.groups.setdefault(key.group, ImportedGroup(key.group))
                    metadata = value_as(records.GroupMetadataValue, record.value)
                    group.protocol_type = "" if metadata is None else metadata.protocol_type
                else:
                    state.skipped[type(key).__name__ if key is not None else "unknown record type"] += 1


def _end_transaction(state: KafkaLogState, pending: dict, raw_key: bytes | None) -> None:
    if raw_key is None or len(raw_key) < _CONTROL_KEY.size:
        raise KafkaLogError(f"a control record with an unreadable key: {raw_key!r}")
    _version, marker = _CONTROL_KEY.unpack_from(raw_key)
    if marker != _COMMIT_MARKER:
        state.transactions["aborted"] += 1
        return
    state.transactions["committed"] += 1
    for (group_id, topic, partition), (log_offset, value) in pending.items():
        current = state.groups.get(group_id)
        existing = None if current is None else current.offsets.get((topic, partition))
        # A plain commit written after the transactional one (and before its marker) wins.
        if existing is None or existing[0] < log_offset:
            _apply_offset(state, group_id, topic, partition, log_offset, value)


def _apply_offset(state: KafkaLogState, group_id: str, topic: str, partition: int, log_offset: int,
                  value: records.OffsetCommitValue | None) -> None:
    group = state.groups.setdefault(group_id, ImportedGroup(group_id))
    if value is None:
        group.offsets.pop((topic, partition), None)
    else:
        group.offsets[(topic, partition)] = (log_offset, value)


async def adopt_into(data_dir: str | Path, state: KafkaLogState, num_partitions: int = 50) -> dict[str, bool]:
    """Each group through kgc's partition write path; group id -> adopted (False: kgc had it).
    Only the groups' partitions are opened, and locked: `DataDirInUse` while a kgc serves one."""
    targets = {partition_for(group_id, num_partitions) for group_id in state.groups}
    store = FileLogStore(data_dir, num_partitions=num_partitions, partitions=targets)
    await store.open()
    shards = group_shard_factory(GroupConfig(num_partitions=num_partitions), wall_clock_ms,
                                 lambda prefix: f"{prefix}-{uuid.uuid4()}")
    runtime = CoordinatorRuntime(store, num_partitions, clock=wall_clock_ms, shard_factory=shards,
                                 owned=targets)
    outcome: dict[str, bool] = {}
    try:
        await runtime.start()
        await runtime.wait_loaded()
        for group_id, group in state.groups.items():
            offsets = group.adopted_offsets()
            outcome[group_id] = await runtime.write(partition_for(group_id, num_partitions),
                                                    _adoption(group_id, group.protocol_type, offsets))
    finally:
        await runtime.close()
        await store.close()
    return outcome


def _adoption(group_id: str, protocol_type: str, offsets: tuple[AdoptedOffset, ...]) -> WriteOp:
    return lambda shard, _handle: shard.adopt(group_id, protocol_type, offsets, SOURCE)


def run_kafka_log_import(kafka_dir: str, data_dir: str, groups: list[str] | None, apply: bool) -> int:
    try:
        state = read_kafka_log(kafka_dir)
    except (KafkaLogError, OSError) as exc:
        print(f"kgc import: {exc}", file=sys.stderr)
        return 1
    if groups is not None:
        state.groups = {g: s for g, s in state.groups.items() if g in set(groups)}
    for kind, count in sorted(state.skipped.items()):
        print(f"skipped {count} {kind} record(s)")
    print(f"transactions: {state.transactions['committed']} committed, {state.transactions['aborted']} aborted")
    if not apply:
        for group_id, group in state.groups.items():
            kind = f"{group.protocol_type!r} group" if group.protocol_type else "simple group"
            print(f"{group_id}: would adopt {kind} with {len(group.offsets)} committed offset(s): "
                  + " ".join(f"{o.topic}-{o.partition}={o.offset}" for o in group.adopted_offsets()))
        print(f"{len(state.groups)} group(s) would be adopted; nothing written (--apply writes)")
        return 0
    try:
        outcome = asyncio.run(adopt_into(data_dir, state))
    except DataDirInUse as exc:
        print(f"kgc import: {exc}; stop it first: nothing was adopted", file=sys.stderr)
        return 1
    for group_id, adopted in outcome.items():
        print(f"{group_id}: " + ("adopted" if adopted else "kgc already has this group, or adopted it before: left alone"))
    print(f"{sum(outcome.values())} group(s) adopted into {data_dir}")
    return 0
