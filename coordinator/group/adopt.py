"""Adoption: a group's state from another coordinator, as records of kgc's own.

Pure: the runtime's `Adoption` (coordinator/runtime/adoption.py) or `kgc import` fetches
the state; `adoption_records` turns it into the records kgc would have written itself,
with audit headers that say where they came from (`records.headers.adoption_headers`), and the
shard replays them through the normal write path. First comes kgc's own AdoptedGroup
record, which outlives the group (adoption happens once per group, restarts included);
then a group with a protocol type (a "consumer" group) gets an Empty GroupMetadata record,
so it exists even before its first member joins; a simple group (no protocol type) is its
offsets alone, as in Kafka.
"""

from __future__ import annotations

from typing import NamedTuple

from coordinator.records import (
    CoordinatorRecord,
    OffsetCommitValue,
    new_adopted_group_record,
    new_empty_group_metadata_record,
    new_offset_commit_record,
)


class AdoptedOffset(NamedTuple):
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str


def adoption_records(group_id: str, protocol_type: str, offsets: tuple[AdoptedOffset, ...], *, source: str,
                     now_ms: int) -> tuple[CoordinatorRecord, ...]:
    adopted = new_adopted_group_record(group_id, source, now_ms)
    records = [adopted]
    if protocol_type:
        records.append(new_empty_group_metadata_record(group_id, protocol_type, now_ms, headers=adopted.headers))
    records += [new_offset_commit_record(group_id, o.topic, o.partition,
                                         OffsetCommitValue(o.offset, o.leader_epoch, o.metadata, now_ms),
                                         headers=adopted.headers)
                for o in offsets]
    return tuple(records)
