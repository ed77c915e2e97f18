"""A compacted load (the latest record per key, replayed in offset order) must give the
state a replay of every record gives: generated logs of commits, offset and group
deletions, group records with and without members, re-creations, legacy and unknown
keys, cut into random batches, loaded from real segment files and from the memory store."""

from __future__ import annotations

import asyncio
import struct
import tempfile

from hypothesis import example, given, settings
from hypothesis import strategies as st

from coordinator import records
from coordinator.group.config import GroupConfig
from coordinator.group.errors import CorruptStateError
from coordinator.group.shard import GroupShard
from coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from coordinator.runtime.loader import KafkaRecordSerde, load_partition
from storage.api import LogRecord
from storage.file_store import FileLogStore
from storage.memory_store import MemoryLogStore
from tests.support.manual_timer import ManualTimer

SERDE = KafkaRecordSerde()
NOW_MS = 5_000


def attributes(obj: object) -> dict:
    """An object's attributes by name, from `__dict__` or its classes' `__slots__`."""
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    names = [name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())]
    return {name: getattr(obj, name) for name in names if hasattr(obj, name)}

groups = st.sampled_from(["a", "b", "c"])
topics = st.sampled_from(["t", "u"])
partitions = st.integers(0, 1)


def commit(group: str, topic: str, partition: int, offset: int = 1, legacy: bool = False) -> LogRecord:
    key = records.serialize_key(OffsetCommitKey(group, topic, partition))
    if legacy:
        # Key type 0 (an old broker's) has type 1's layout and names the same offset.
        key = struct.pack(">h", records.OFFSET_COMMIT_LEGACY_KEY_TYPE) + key[2:]
    return LogRecord(key, records.serialize_value(OffsetCommitValue(offset, -1, "", NOW_MS - offset)))


def delete_offset(group: str, topic: str, partition: int) -> LogRecord:
    return LogRecord(records.serialize_key(OffsetCommitKey(group, topic, partition)), None)


def group_record(group: str, generation: int = 1, members: int = 0) -> LogRecord:
    ids = [f"{group}-m{i}" for i in range(members)]
    value = GroupMetadataValue("consumer", generation, "range" if members else None, ids[0] if members else None,
                               NOW_MS + generation,
                               tuple(MemberMetadata(m, None, "c", "/h", 30_000, 10_000, b"", b"a") for m in ids))
    return LogRecord(records.serialize_key(GroupMetadataKey(group)), records.serialize_value(value))


def delete_group(group: str) -> LogRecord:
    return LogRecord(records.serialize_key(GroupMetadataKey(group)), None)


def unknown(group: str, value: bytes | None) -> LogRecord:
    # Type 9 was removed from Kafka: unknown to every coordinator.
    return LogRecord(struct.pack(">hh", 9, 1) + group.encode(), value)


log_records = st.one_of(
    st.builds(commit, groups, topics, partitions, st.integers(0, 1_000), st.booleans()),
    st.builds(delete_offset, groups, topics, partitions),
    st.builds(group_record, groups, st.integers(0, 5), st.integers(0, 2)),
    st.builds(delete_group, groups),
    st.builds(unknown, groups, st.none() | st.just(b"\0\0")),
)


def new_shard() -> GroupShard:
    return GroupShard(0, GroupConfig(), ManualTimer(lambda: NOW_MS), lambda: NOW_MS, lambda prefix: prefix)


def replay_one_by_one(log: list[LogRecord]) -> tuple[GroupShard, list[LogRecord]]:
    """The reference: every record replayed in order. A record replay refuses is left out
    of the log, and so is a group tombstone while the group has members: kgc writes one
    only to upgrade the group to a KIP-848 consumer group, with that group's records right
    after it (which this generator does not make)."""
    shard = new_shard()
    kept = []
    for record in log:
        decoded = records.deserialize(record.key, record.value)
        if decoded is not None:
            key, value = decoded
            if isinstance(key, GroupMetadataKey) and value is None and key.group in shard.groups \
                    and shard.groups[key.group].members:
                continue
            try:
                shard.replay(len(kept), CoordinatorRecord(*decoded))
            except CorruptStateError:
                continue
        kept.append(record)
    return shard, kept


def state(shard: GroupShard) -> tuple:
    """Hard state, compared by value (dict order is no state: Kafka keeps hash maps)."""
    group_state = {}
    for group_id, group in shard.groups.items():
        fields = attributes(group)
        fields["members"] = {m: tuple(attributes(member).values())
                             for m, member in group.members.items()}
        group_state[group_id] = fields
    return group_state, shard.offsets.committed


async def load_from(store, log: list[LogRecord], cuts: list[int]) -> GroupShard:
    await store.open()
    try:
        start = 0
        for cut in sorted({c % (len(log) + 1) for c in cuts} | {len(log)}):
            if cut > start:
                await store.append(0, log[start:cut], NOW_MS).durable
                start = cut
        shard = new_shard()
        summary = await load_partition(store, 0, shard, SERDE, chunk_records=3)
        assert (summary.records, summary.end_offset) == (len(log), len(log))
        return shard
    finally:
        await store.close()


@settings(max_examples=300, deadline=None)
@given(log=st.lists(log_records, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=8))
# a simple group (made by its commit) whose offsets are all deleted still exists
@example(log=[commit("a", "t", 0), delete_offset("a", "t", 0)], cuts=[])
# ... also when its group record was deleted before the commit
@example(log=[group_record("a"), delete_group("a"), commit("a", "t", 0), delete_offset("a", "t", 0)], cuts=[1])
# a legacy key and a current key name the same offset: the later one wins
@example(log=[commit("a", "t", 0, 5, legacy=True), commit("a", "t", 0, 7), commit("a", "t", 0, 9, legacy=True)],
         cuts=[])
def test_a_compacted_load_gives_the_state_of_a_full_replay(log, cuts):
    reference, kept = replay_one_by_one(log)
    with tempfile.TemporaryDirectory() as data_dir:
        from_files = asyncio.run(load_from(FileLogStore(data_dir, num_partitions=1, fsync="never"), kept, cuts))
    from_memory = asyncio.run(load_from(MemoryLogStore(num_partitions=1), kept, cuts))
    assert state(from_files) == state(reference)
    assert state(from_memory) == state(reference)
