"""Adoption: a group's state from another coordinator, as records of kgc's own.

Pure: the service's `Adoption` (coordinator/service/adoption.py) or `kgc import` fetches
the state; `adoption_records` turns it into the records kgc would have written itself,
with audit headers that say where they came from (`records.headers.adoption_headers`), and the
shard replays them through the normal write path. First comes kgc's own AdoptedGroup
record, which outlives the group (adoption happens once per group, restarts included);
then a group with a protocol type (a "consumer" group) gets an Empty GroupMetadata record,
so it exists even before its first member joins; a simple group (no protocol type) is its
offsets alone, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
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


# Group states with members working (classic and KIP-848); Tansu says "Unknown" for a live
# group, so members present count as live whatever the state says.
_LIVE_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Stable", "Assigning", "Reconciling"})


@dataclass(frozen=True, slots=True)
class UpstreamGroup:
    group_id: str
    state: str
    protocol_type: str
    members: tuple[str, ...]
    offsets: tuple[AdoptedOffset, ...]

    @property
    def live(self) -> bool:
        return bool(self.members) or self.state in _LIVE_STATES
