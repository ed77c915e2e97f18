"""Logs and generator settings the offline audit and compaction tests share: the
generated data dirs' settings, single records as Kafka writes them, and a topic deleted and
created again under its name."""

from __future__ import annotations

import struct
import uuid

from coordinator import records
from coordinator.offline.generate import GeneratorConfig
from storage.api import LogRecord

# Anomalies of every kind, damaged batches, and active segments still being written.
DIRTY = GeneratorConfig(records=6_000, groups=24, integrity=True, partial_tail=True, segment_bytes=32 * 1024)
DAY_MS = 24 * 3600 * 1000
# Normal groups only, for compaction (which refuses damaged partitions).
CLEAN = GeneratorConfig(records=6_000, groups=24, per_type=0, segment_bytes=32 * 1024)
# A log as Kafka writes it: no audit headers, damaged batches and live tails included.
KAFKA_WRITTEN = GeneratorConfig(records=6_000, groups=24, integrity=True, partial_tail=True, headers=False,
                                segment_bytes=32 * 1024, seed=3)


def offset_commit_record(group: str) -> LogRecord:
    """Offset 5 of t-0, committed outside any generation, as Kafka writes it."""
    record = records.new_offset_commit_record(group, "t", 0, records.OffsetCommitValue(5, -1, "", 1))
    return LogRecord(records.serialize_key(record.key), records.serialize_value(record.value))


def consumer_group_record(group: str, value: bytes | None) -> LogRecord:
    """A KIP-848 group's metadata record (type 3) with the given value (None: a tombstone)."""
    key = records.CONSUMER_GROUP_METADATA_KEY_TYPE.to_bytes(2, "big") + len(group).to_bytes(2, "big") + group.encode()
    return LogRecord(key, value)


# ---- a topic deleted and created again under its name: commits that recorded its old id

OLD_ID = uuid.UUID("00000000-0000-4000-8000-00000000000a")     # "t" before it was deleted
NEW_ID = uuid.UUID("00000000-0000-4000-8000-00000000000b")     # "t" now
RECREATED_LOG_OFFSETS = {("t", 0): (0, 10), ("t", 1): (0, 10)}
RECREATED_TOPIC_IDS = {"t": NEW_ID}
# (type, group, topic, partition, committed offset) the upstream checks must find in it.
RECREATED_FINDINGS = {("offset_of_recreated_topic", "old", "t", 0, 7),
                      ("offset_of_recreated_topic", "old-past-end", "t", 1, 1000),
                      ("offset_of_deleted_topic", "gone", "elsewhere", 0, 3),
                      ("offset_above_log_end", "new-past-end", "t", 0, 50)}


def recreated_topic_log() -> list[LogRecord]:
    """Commits to "t" by id before and after it was recreated, by name, and to a topic
    since deleted: read against RECREATED_LOG_OFFSETS and RECREATED_TOPIC_IDS."""
    def commit(group: str, partition: int, offset: int, topic_id: uuid.UUID | None, topic: str = "t") -> LogRecord:
        record = records.new_offset_commit_record(group, topic, partition,
                                                  records.OffsetCommitValue(offset, -1, "", 1, -1, topic_id))
        return LogRecord(records.serialize_key(record.key), records.serialize_value(record.value), record.headers)

    def tombstone(group: str, partition: int) -> LogRecord:
        record = records.new_offset_commit_tombstone(group, "t", partition)
        return LogRecord(records.serialize_key(record.key), None, record.headers)

    def kafka_v4(group: str, offset: int, metadata: bytes, topic_id: uuid.UUID | None) -> LogRecord:
        # OffsetCommitValue v4 as Kafka 4.1+ writes it, also without an id (kgc writes v3 then)
        tags = b"\x00" if topic_id is None else b"\x01\x00\x10" + topic_id.bytes
        value = (struct.pack(">hqi", 4, offset, -1) + bytes([len(metadata) + 1]) + metadata + struct.pack(">q", 1)
                 + tags)
        return commit(group, 0, offset, None)._replace(value=value)

    return [commit("old", 0, 7, OLD_ID),                        # the old topic's: recreated
            commit("old-past-end", 1, 1000, OLD_ID),            # the old topic's bounds are not the new one's
            commit("new", 0, 4, NEW_ID),                        # the topic now: fine
            commit("moved-on", 0, 2, OLD_ID), commit("moved-on", 0, 5, NEW_ID),   # its last commit counts
            commit("by-name", 0, 6, None),                      # no id recorded: not judged by id
            kafka_v4("kafka-by-name", 4, b"", None), kafka_v4("kafka-by-id", 5, b"", NEW_ID),
            kafka_v4("kafka-metadata", 3, b"m", NEW_ID), kafka_v4("kafka-zero-id", 2, b"", uuid.UUID(int=0)),
            commit("cleaned", 1, 3, OLD_ID), tombstone("cleaned", 1),           # deleted with the topic
            commit("gone", 0, 3, OLD_ID, topic="elsewhere"),   # a topic the cluster lacks: deleted, not recreated
            commit("new-past-end", 0, 50, NEW_ID)]
