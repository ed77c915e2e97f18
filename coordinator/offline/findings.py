"""What the audit reports: one `Finding` per problem, with the who and when it knows.

A finding names the group, topic and partition it is about, the log position that shows
it (`log_partition`, `segment`, `position` of the batch, `record_offset`), the offsets
involved, the record time, and who wrote the record (the audit headers the coordinator
stamps: member id, generation, client id and host). Fields that do not apply are None.

`identity()` is what makes two findings the same problem: the test that checks the
audit against the generator's injected anomalies compares these.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, fields
from typing import Any


class FindingType(enum.StrEnum):
    # Offsets and groups, from replaying the log.
    OFFSET_REGRESSION = "offset_regression"                  # a commit below the previous one
    STALE_GENERATION_COMMIT = "stale_generation_commit"      # written by an older generation
    ORPHANED_OFFSET = "orphaned_offset"                      # offsets of a group without metadata
    OFFSET_OF_DELETED_GROUP = "offset_of_deleted_group"      # left behind when its group was deleted
    OFFSET_PAST_RETENTION = "offset_past_retention"          # kgc's expiry would delete it now
    EMPTY_GROUP_PAST_RETENTION = "empty_group_past_retention"
    OPEN_TRANSACTION = "open_transaction"                    # transactional offsets with no marker after them
    # Integrity of the files.
    BAD_CRC = "bad_crc"
    TORN_BATCH = "torn_batch"                                # a batch cut short (or cut off by recovery)
    CORRUPT_BATCH = "corrupt_batch"                          # impossible length or magic
    NON_INCREASING_OFFSETS = "non_increasing_offsets"
    UNDECODABLE_RECORD = "undecodable_record"
    # Against the upstream cluster's logs.
    OFFSET_BELOW_LOG_START = "offset_below_log_start"        # records deleted before the group read them
    OFFSET_ABOVE_LOG_END = "offset_above_log_end"            # impossible
    OFFSET_OF_DELETED_TOPIC = "offset_of_deleted_topic"      # the topic is gone from the cluster
    OFFSET_OF_RECREATED_TOPIC = "offset_of_recreated_topic"  # committed to a topic of that name since deleted


INTEGRITY_TYPES = frozenset({FindingType.BAD_CRC, FindingType.TORN_BATCH, FindingType.CORRUPT_BATCH,
                             FindingType.NON_INCREASING_OFFSETS, FindingType.UNDECODABLE_RECORD})
# Findings only an audit given the upstream cluster (--upstream) can make.
UPSTREAM_TYPES = frozenset({FindingType.OFFSET_BELOW_LOG_START, FindingType.OFFSET_ABOVE_LOG_END,
                            FindingType.OFFSET_OF_DELETED_TOPIC, FindingType.OFFSET_OF_RECREATED_TOPIC})
# Findings about an offset's final state: one per (group, topic, partition).
PER_OFFSET_TYPES = frozenset({FindingType.ORPHANED_OFFSET, FindingType.OFFSET_OF_DELETED_GROUP,
                              FindingType.OFFSET_PAST_RETENTION,
                              FindingType.OFFSET_BELOW_LOG_START, FindingType.OFFSET_ABOVE_LOG_END,
                              FindingType.OFFSET_OF_DELETED_TOPIC, FindingType.OFFSET_OF_RECREATED_TOPIC})


@dataclass(frozen=True, slots=True)
class Finding:
    type: FindingType
    log_partition: int
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    record_offset: int | None = None        # the record (or batch) in the log that shows it
    committed_offset: int | None = None
    previous_offset: int | None = None      # regression: the commit it went below; upstream: the log bound
    timestamp_ms: int | None = None         # when the record was written
    member_id: str | None = None
    generation: int | None = None
    client_id: str | None = None
    client_host: str | None = None
    segment: str | None = None
    position: int | None = None             # byte position of the batch in its segment
    detail: str = ""

    def identity(self) -> tuple:
        if self.type in INTEGRITY_TYPES:
            return (self.type, self.log_partition, self.segment, self.position)
        if self.type is FindingType.EMPTY_GROUP_PAST_RETENTION:
            return (self.type, self.group)
        if self.type in PER_OFFSET_TYPES:
            return (self.type, self.group, self.topic, self.partition)
        return (self.type, self.group, self.topic, self.partition, self.record_offset)

    def as_row(self) -> dict:
        row = asdict(self)
        row["type"] = self.type.value
        return row

    @classmethod
    def from_row(cls, row: dict) -> Finding:
        # A row read back from JSON or Parquet: its values are as the table holds them.
        values: dict[str, Any] = {f.name: row.get(f.name) for f in fields(cls)}
        values["type"] = FindingType(values["type"])
        values["detail"] = values["detail"] or ""
        return cls(**values)
