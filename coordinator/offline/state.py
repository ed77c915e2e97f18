"""The state a data dir loads into, for comparing a compacted log with its input.

"State" is what the loader's replay keeps: the committed offset per (group, topic,
partition) and the last GroupMetadata per group, latest offset winning and tombstones
deleting. It is decoded with `coordinator.records` over `storage.format` batches (via
`scan`), the one parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coordinator import records
from coordinator.offline.record_values import value_as
from coordinator.offline.scan import PartitionScan
from coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from storage.file_store import partition_dirs


@dataclass(slots=True)
class ReplayedState:
    offsets: dict[tuple[str, str, int], OffsetCommitValue] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)


def replay_state(data_dir: str | Path) -> ReplayedState:
    state = ReplayedState()
    for partition, directory in partition_dirs(data_dir).items():
        scan = PartitionScan(partition, directory)
        for scanned in scan:
            if scanned.batch.is_control:
                continue
            for stored in scanned.batch.records:
                decoded = records.deserialize(stored.key, stored.value)
                if decoded is None:
                    continue
                key, value = decoded
                if isinstance(key, OffsetCommitKey):
                    tp = (key.group, key.topic, key.partition)
                    commit = value_as(OffsetCommitValue, value)
                    if commit is None:
                        state.offsets.pop(tp, None)
                    else:
                        state.offsets[tp] = commit
                elif isinstance(key, GroupMetadataKey):
                    metadata = value_as(GroupMetadataValue, value)
                    if metadata is None:
                        state.groups.pop(key.group, None)
                    else:
                        state.groups[key.group] = metadata
        if scan.problems:
            raise ValueError(f"partition {partition} is damaged: {scan.problems[0]}")
        state.next_offsets[partition] = scan.next_offset
    return state
