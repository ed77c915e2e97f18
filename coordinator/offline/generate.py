"""Synthetic data dirs in the real format, of any size, with known injected anomalies.

`generate(data_dir, GeneratorConfig(...))` writes `__consumer_offsets-<p>/` segment files
exactly as kgc would (RecordBatch v2 from `storage.format`, keys and values from
`coordinator.records`, the coordinator's audit headers) and returns a `Manifest`: every
finding the audit must report (and, by omission, everything it must not), plus log
start/end offsets for an upstream check.

What normal groups do (nothing here is a finding): a "consumer" group is placed on its
Kafka partition (`partition_for`), becomes Stable with a GroupMetadata record, and its
members commit their assigned partitions with growing offsets, one batch per commit,
stamped with member id, generation and client; now and then it rebalances (a new
generation and members); one group in ten ends Empty (recently), one in ten is deleted
(offset and group tombstones in one batch, as DeleteGroups writes them).

Injected anomalies, `per_type` of each:
- offset_regression: a member commits below its previous commit;
- stale_generation_commit: just after a rebalance, a member of the old generation commits;
  and in a KIP-848 consumer group (its records: member, group epoch, target assignment,
  each member's current assignment, in Kafka's order), a member commits with an epoch
  older than the one it was given its partitions at, beside its commits at its current
  and (accepted for partitions it was given by then) previous epoch, which are not findings;
- orphaned_offset: a group whose members commit with a generation but whose GroupMetadata
  is not in the log (every one of its offsets is a finding); beside them, simple groups
  (generation -1, no member, no GroupMetadata, as Kafka has them) that must not be reported;
- offset_of_deleted_group: a group whose GroupMetadata was deleted with only half of its
  offsets (the other half are left behind);
- offset_past_retention: a Stable group that stopped subscribing to a topic whose last
  commit is older than the retention;
- empty_group_past_retention: a group Empty for longer than the retention (its offsets
  are then past retention too, and are listed);
- offset_below_log_start / offset_above_log_end: groups on topics of their own whose
  committed offsets the manifest's `log_offsets` put below the log start / above its end;
- integrity (`integrity=True`): a batch with a bad CRC, one with a bad magic, a
  duplicated batch (offsets not increasing), a batch whose record key does not decode,
  a closed segment ending in a torn batch, and a `.torn-1` file from a past recovery.
  The damaged batches carry records of no consequence, so losing them changes nothing
  else the audit says.
`headers=False` writes the log as Kafka does, without kgc's audit headers: stale
generations cannot be seen then (not expected), and simple groups are reported as
orphaned (their writer is unknown).
`partial_tail=True` leaves half a batch at the end of some active segments, as a live
data dir being written has: that must not be reported.

Generation is per partition, so memory stays small whatever the size; the same seed
gives the same bytes.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)

from coordinator import records
from coordinator.offline.findings import UPSTREAM_TYPES, Finding, FindingType
from coordinator.partitioning import partition_for
from coordinator.records import CoordinatorRecord, GroupMetadataValue, MemberMetadata, OffsetCommitValue
from storage.api import LogRecord
from storage.file_store import TOPIC
from storage.format import MAGIC_POS, encode_batch
from storage.segment import TORN_SUFFIX, segment_name

DAY_MS = 24 * 3600 * 1000
INTEGRITY_KINDS = (FindingType.BAD_CRC, FindingType.CORRUPT_BATCH, FindingType.NON_INCREASING_OFFSETS,
                   FindingType.UNDECODABLE_RECORD, FindingType.TORN_BATCH)
# A key of record type 1 whose group string claims 9 bytes and has 5.
UNDECODABLE_KEY = b"\x00\x01\x00\x09trunc"


@dataclass(frozen=True, slots=True)
class GeneratorConfig:
    records: int = 20_000
    groups: int = 40
    topics: int = 6
    partitions_per_topic: int = 4
    num_partitions: int = 50
    now_ms: int = 1_790_000_000_000
    span_ms: int = DAY_MS                      # normal activity lies within this much before now
    offsets_retention_ms: int = 7 * DAY_MS
    segment_bytes: int = 256 * 1024
    per_type: int = 2                          # injected anomalies of each kind (0: none)
    integrity: bool = False
    headers: bool = True                       # kgc's audit headers (False: as Kafka writes the log)
    partial_tail: bool = False
    seed: int = 1


@dataclass(slots=True)
class Manifest:
    expected: list[Finding] = field(default_factory=list)
    log_offsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    records: int = 0
    next_offsets: dict[int, int] = field(default_factory=dict)

    def expected_without_upstream(self) -> list[Finding]:
        return [f for f in self.expected if f.type not in UPSTREAM_TYPES]

    def to_json(self) -> str:
        return json.dumps({
            "records": self.records,
            "next_offsets": self.next_offsets,
            "expected": [f.as_row() for f in self.expected],
            "log_offsets": [[t, p, s, e] for (t, p), (s, e) in sorted(self.log_offsets.items())],
        }, indent=1)


# ---------------------------------------------------------------------- events


@dataclass(slots=True)
class _Event:
    timestamp_ms: int
    records: list[CoordinatorRecord]
    # Findings the records at these indexes must raise; their record offsets are filled in on writing.
    expect: list[tuple[int, Finding]] = field(default_factory=list)


@dataclass(slots=True)
class _Member:
    member_id: str
    client_id: str
    client_host: str


@dataclass(slots=True)
class _Group:
    """One group's life, as the events it writes."""

    name: str
    rng: random.Random
    log_partition: int
    events: list[_Event] = field(default_factory=list)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    generation: int = 0
    members: list[_Member] = field(default_factory=list)
    topics: list[tuple[str, int]] = field(default_factory=list)
    clock_ms: int = 0

    def tick(self, until_ms: int, steps_left: int) -> int:
        step = max(1, (until_ms - self.clock_ms) // max(steps_left, 1))
        self.clock_ms += self.rng.randint(1, step) if step > 1 else 1
        return self.clock_ms

    def new_members(self, count: int) -> None:
        self.members = []
        for i in range(count):
            client_id = f"{self.name}-client-{i}"
            self.members.append(_Member(f"{client_id}-{self.rng.getrandbits(48):012x}", client_id,
                                        f"/10.0.{self.rng.randint(0, 255)}.{self.rng.randint(1, 254)}"))

    def assignment(self) -> dict[str, list[tuple[str, int]]]:
        keys = [(t, p) for t, n in self.topics for p in range(n)]
        return {m.member_id: keys[i::len(self.members)] for i, m in enumerate(self.members)}

    def stabilize(self, members: int, topics: list[tuple[str, int]] | None = None) -> None:
        """A rebalance that completes: a new generation with `members`, recorded."""
        self.generation += 1
        if topics is not None:
            self.topics = topics
        self.new_members(members)
        now = self.tick(self.clock_ms + 1000, 1)
        subscription = ConsumerProtocolMemberMetadata_v0(0, sorted({t for t, _ in self.topics}), b"").encode()
        assigned = self.assignment()
        value = GroupMetadataValue("consumer", self.generation, "range", self.members[0].member_id, now, tuple(
            MemberMetadata(m.member_id, None, m.client_id, m.client_host, 60_000, 30_000, subscription,
                           _assignment_bytes(assigned[m.member_id]))
            for m in self.members))
        leader = self.members[0]
        self.events.append(_Event(now, [records.new_group_metadata_record(
            self.name, value, member_id=leader.member_id, client_id=leader.client_id,
            client_host=leader.client_host)]))

    def empty(self) -> None:
        """Every member left: the join completes with nobody and the group is Empty."""
        self.generation += 1
        self.members = []
        now = self.tick(self.clock_ms + 1000, 1)
        self.events.append(_Event(now, [records.new_group_metadata_record(
            self.name, GroupMetadataValue("consumer", self.generation, None, None, now, ()))]))

    def commit(self, member: _Member, keys: list[tuple[str, int]], *, generation: int | None = None,
               regress: tuple[str, int] | None = None, until_ms: int, steps_left: int) -> _Event:
        now = self.tick(until_ms, steps_left)
        event = _Event(now, [])
        for key in keys:
            if key == regress and self.positions.get(key, 0) > 0:
                offset = self.rng.randint(0, self.positions[key] - 1)
            else:
                offset = self.positions.get(key, 0) + self.rng.randint(1, 50)
            self.positions[key] = offset
            event.records.append(records.new_offset_commit_record(
                self.name, key[0], key[1], OffsetCommitValue(offset, -1, "", now),
                member_id=member.member_id, generation=self.generation if generation is None else generation,
                client_id=member.client_id, client_host=member.client_host))
        self.events.append(event)
        return event

    def commit_all(self, until_ms: int, steps_left: int) -> None:
        assigned = self.assignment()
        for member in self.members:
            self.commit(member, assigned[member.member_id], until_ms=until_ms, steps_left=steps_left)

    def delete(self) -> None:
        now = self.tick(self.clock_ms + 1000, 1)
        tombstones = [records.new_offset_commit_tombstone(self.name, t, p) for t, p in self.positions]
        tombstones.append(records.new_group_metadata_tombstone(self.name, generation=self.generation))
        self.events.append(_Event(now, tombstones))
        self.positions.clear()


def _assignment_bytes(keys: list[tuple[str, int]]) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for t, p in keys:
        by_topic[t].append(p)
    return ConsumerProtocolMemberAssignment_v0(0, sorted(by_topic.items()), b"").encode()


# ---------------------------------------------------------------------- group plans


@dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    kind: str                       # "normal" or the anomaly it carries
    index: int


def _plans(config: GeneratorConfig) -> list[_Plan]:
    plans = [_Plan(f"group-{i:05d}", "normal", i) for i in range(config.groups)]
    for kind in ("orphan", "retired", "abandoned", "below", "above", "simple", "leftover", "epochs"):
        plans += [_Plan(f"{kind}-{i}", kind, i) for i in range(config.per_type)]
    return plans


def _normal_life(g: _Group, config: GeneratorConfig, budget: int, kind: str, plan: _Plan) -> None:
    rng = g.rng
    g.clock_ms = config.now_ms - config.span_ms + rng.randint(0, config.span_ms // 4)
    end_ms = config.now_ms - 60_000
    all_topics = [(f"topic-{t}", config.partitions_per_topic) for t in range(config.topics)]
    topics = [(f"{kind}-topic-{plan.index}", 3)] if kind in ("below", "above") else \
        rng.sample(all_topics, rng.randint(1, min(2, len(all_topics))))
    g.stabilize(rng.randint(1, 3), topics)
    per_round = sum(n for _, n in g.topics)
    rounds = max(2, budget // max(per_round, 1))
    # Anomalies in normal groups go at a random round past the first.
    regressions = stale = 0
    if kind == "normal" and plan.index < config.per_type:
        regressions = stale = 1
    for r in range(rounds):
        steps_left = (rounds - r) * (len(g.members) + 1)
        if r and rng.random() < 0.05:
            g.stabilize(rng.randint(1, 3))
            if stale and r > 1:
                stale -= 1
                old = _Member(f"{g.name}-gone-{r}", f"{g.name}-gone", "/10.9.9.9")
                key = g.topics[0][0], 0
                event = g.commit(old, [key], generation=g.generation - 1, until_ms=end_ms, steps_left=steps_left)
                expected_event(event, 0, Finding(FindingType.STALE_GENERATION_COMMIT, g.log_partition, g.name,
                                                 key[0], key[1]))
        if regressions and r == rounds // 2:
            regressions -= 1
            member = g.members[0]
            keys = g.assignment()[member.member_id]
            event = g.commit(member, keys, regress=keys[0], until_ms=end_ms, steps_left=steps_left)
            expected_event(event, 0, Finding(FindingType.OFFSET_REGRESSION, g.log_partition, g.name,
                                             keys[0][0], keys[0][1]))
            continue
        g.commit_all(end_ms, steps_left)
    if stale:
        # No rebalance came by chance: make one, then the stale commit.
        g.stabilize(len(g.members))
        old = _Member(f"{g.name}-gone", f"{g.name}-gone", "/10.9.9.9")
        key = g.topics[0][0], 0
        event = g.commit(old, [key], generation=g.generation - 1, until_ms=end_ms, steps_left=1)
        expected_event(event, 0, Finding(FindingType.STALE_GENERATION_COMMIT, g.log_partition, g.name,
                                         key[0], key[1]))
    if kind == "normal" and plan.index >= config.per_type:
        # One group in ten ends Empty, one in ten is deleted.
        if plan.index % 10 in (3, 7):
            g.empty()
        if plan.index % 10 == 7:
            g.delete()


def expected_event(event: _Event, index: int, finding: Finding) -> None:
    event.expect.append((index, finding))


def _orphan_life(g: _Group, config: GeneratorConfig, expected: list[Finding]) -> None:
    """Members commit with a generation, but the group's metadata is not in the log."""
    g.clock_ms = config.now_ms - config.span_ms // 2
    g.topics = [("topic-0", config.partitions_per_topic)]
    g.generation = 3
    member = _Member(f"{g.name}-member-1", f"{g.name}-client", "/10.1.1.1")
    keys = [("topic-0", p) for p in range(config.partitions_per_topic)]
    for r in range(3):
        g.commit(member, keys, until_ms=config.now_ms - 60_000, steps_left=3 - r)
    expected += [Finding(FindingType.ORPHANED_OFFSET, g.log_partition, g.name, t, p) for t, p in keys]


def _simple_life(g: _Group, config: GeneratorConfig, expected: list[Finding]) -> None:
    """A simple group (an admin tool or assign() consumer, generation -1): no GroupMetadata,
    as in Kafka, and nothing wrong with it. Recent commits, so retention does not apply.
    Without audit headers nothing tells it from an orphan: then it is reported."""
    g.clock_ms = config.now_ms - 3_600_000
    g.topics = [("topic-0", config.partitions_per_topic)]
    member = _Member("", f"{g.name}-tool", "/10.1.1.2")
    keys = [("topic-0", p) for p in range(config.partitions_per_topic)]
    for r in range(3):
        g.commit(member, keys, generation=-1, until_ms=config.now_ms - 60_000, steps_left=3 - r)
    if not config.headers:
        expected += [Finding(FindingType.ORPHANED_OFFSET, g.log_partition, g.name, t, p) for t, p in keys]


def _leftover_life(g: _Group, config: GeneratorConfig, expected: list[Finding]) -> None:
    """A group deleted with only half of its offsets: the rest are left behind."""
    g.clock_ms = config.now_ms - config.span_ms // 2
    g.stabilize(2, [("topic-2", config.partitions_per_topic)])
    g.commit_all(config.now_ms - config.span_ms // 4, 4)
    keys = sorted(g.positions)
    now = g.tick(g.clock_ms + 1000, 1)
    tombstones = [records.new_offset_commit_tombstone(g.name, t, p) for t, p in keys[::2]]
    tombstones.append(records.new_group_metadata_tombstone(g.name, generation=g.generation))
    g.events.append(_Event(now, tombstones))
    expected += [Finding(FindingType.OFFSET_OF_DELETED_GROUP, g.log_partition, g.name, t, p) for t, p in keys[1::2]]


def _retired_life(g: _Group, config: GeneratorConfig, expected: list[Finding]) -> None:
    old_ms = config.now_ms - config.offsets_retention_ms - 2 * DAY_MS
    g.clock_ms = old_ms
    kept, retired = ("topic-0", 2), (f"{g.name}-retired-topic", 2)
    g.stabilize(2, [kept, retired])
    g.commit_all(old_ms + 3_600_000, 4)
    g.clock_ms = config.now_ms - 3_600_000
    g.stabilize(1, [kept])
    g.commit_all(config.now_ms - 60_000, 2)
    expected += [Finding(FindingType.OFFSET_PAST_RETENTION, g.log_partition, g.name, retired[0], p)
                 for p in range(retired[1])]


def _abandoned_life(g: _Group, config: GeneratorConfig, expected: list[Finding]) -> None:
    g.clock_ms = config.now_ms - config.offsets_retention_ms - 3 * DAY_MS
    g.stabilize(2, [("topic-1", config.partitions_per_topic)])
    g.commit_all(g.clock_ms + DAY_MS, 4)
    g.empty()
    expected.append(Finding(FindingType.EMPTY_GROUP_PAST_RETENTION, g.log_partition, g.name))
    expected += [Finding(FindingType.OFFSET_PAST_RETENTION, g.log_partition, g.name, t, p) for t, p in g.positions]


def _member_epochs_life(g: _Group, config: GeneratorConfig) -> None:
    """A KIP-848 consumer group of two members whose epochs move on three times; member
    a commits at each epoch, then at its previous one (accepted: it was given its
    partitions at that epoch), then at an older one (the finding). Recent, so retention
    does not apply."""
    g.clock_ms = config.now_ms - 3_600_000
    topic = ("topic-0", config.partitions_per_topic)
    g.topics = [topic]
    topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"kgc-generated-topic/{topic[0]}")
    a, b = (_Member(f"{g.name}-{m}-{g.rng.getrandbits(48):012x}", f"{g.name}-{m}", "/10.2.2.2") for m in "ab")
    keys = [(topic[0], p) for p in range(topic[1])]
    owned = {a.member_id: keys[: len(keys) // 2], b.member_id: keys[len(keys) // 2:]}
    until_ms = config.now_ms - 60_000

    def bump(epoch: int) -> None:
        """Group epoch `epoch`: both members (re)stated, their targets, and each member at it."""
        now = g.tick(g.clock_ms + 1000, 1)
        batch = [records.new_consumer_group_member_subscription_record(
                     g.name, m.member_id, records.ConsumerGroupMemberMetadataValue(
                         None, None, m.client_id, m.client_host, (topic[0],), None, 30_000, "uniform"))
                 for m in (a, b)]
        batch.append(records.new_consumer_group_epoch_record(g.name, epoch))
        partitions = {m.member_id: ((topic_id, tuple(p for _t, p in owned[m.member_id])),) for m in (a, b)}
        batch += [records.new_consumer_group_target_assignment_record(g.name, m.member_id, partitions[m.member_id])
                  for m in (a, b)]
        batch.append(records.new_consumer_group_target_assignment_epoch_record(g.name, epoch))
        # The members are given their partitions again at epoch 2 and keep them at 3 (KIP-1251's
        # assignment epochs): a commit at 2 is then accepted at epoch 3, one at 1 is not.
        given = {mid: tuple((t, ps, (min(epoch, 2),) * len(ps)) for t, ps in tps) for mid, tps in partitions.items()}
        batch += [records.new_consumer_group_current_assignment_record(
                      g.name, m.member_id, records.ConsumerGroupCurrentMemberAssignmentValue(
                          epoch, epoch - 1, 0, given[m.member_id], ()))
                  for m in (a, b)]
        g.events.append(_Event(now, batch))

    for epoch in (1, 2, 3):
        bump(epoch)
        for m in (a, b):
            g.commit(m, owned[m.member_id], generation=epoch, until_ms=until_ms, steps_left=4)
    g.commit(a, owned[a.member_id], generation=2, until_ms=until_ms, steps_left=3)     # previous epoch: accepted
    stale = g.commit(a, owned[a.member_id][:1], generation=1, until_ms=until_ms, steps_left=2)
    expected_event(stale, 0, Finding(FindingType.STALE_GENERATION_COMMIT, g.log_partition, g.name, *keys[0]))


# ---------------------------------------------------------------------- writing


class _PartitionWriter:
    def __init__(self, directory: Path, partition: int, segment_bytes: int):
        self.directory = directory
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.segments: list[tuple[int, bytearray]] = []
        self.next_offset = 0
        self.last_batch = b""

    def _room(self, size: int) -> tuple[str, bytearray]:
        if not self.segments or (self.segments[-1][1] and len(self.segments[-1][1]) + size > self.segment_bytes):
            self.roll()
        base, data = self.segments[-1]
        return segment_name(base), data

    def roll(self) -> None:
        self.segments.append((self.next_offset, bytearray()))

    def append(self, batch: bytes, records_count: int) -> tuple[str, int]:
        name, data = self._room(len(batch))
        position = len(data)
        data += batch
        self.next_offset += records_count
        return name, position

    def write(self, event: _Event, headers: bool) -> int:
        base = self.next_offset
        batch = encode_batch(base, [_log_record(r, headers) for r in event.records], event.timestamp_ms)
        self.append(batch, len(event.records))
        self.last_batch = batch
        return base

    def flush(self, tail: bytes = b"") -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.segments:
            self.roll()
        for i, (base, data) in enumerate(self.segments):
            last = i == len(self.segments) - 1
            (self.directory / segment_name(base)).write_bytes(bytes(data) + (tail if last else b""))


def _log_record(record: CoordinatorRecord, headers: bool = True) -> LogRecord:
    value = None if record.value is None else records.serialize_value(record.value)
    return LogRecord(records.serialize_key(record.key), value, record.headers if headers else ())


def _filler(writer: _PartitionWriter, timestamp_ms: int) -> bytes:
    """A batch of no consequence: a commit for a group and topic nobody reads."""
    record = records.new_offset_commit_record("filler", "filler", 0, OffsetCommitValue(0, -1, "", timestamp_ms))
    return encode_batch(writer.next_offset, [_log_record(record)], timestamp_ms)


def _inject(writer: _PartitionWriter, kind: FindingType, timestamp_ms: int) -> Finding:
    p = writer.partition
    if kind is FindingType.NON_INCREASING_OFFSETS:
        name, position = writer.append(writer.last_batch, 0)
        return Finding(kind, p, segment=name, position=position)
    if kind is FindingType.UNDECODABLE_RECORD:
        batch = encode_batch(writer.next_offset, [LogRecord(UNDECODABLE_KEY, None)], timestamp_ms)
        name, position = writer.append(batch, 1)
        return Finding(kind, p, segment=name, position=position)
    damaged = bytearray(_filler(writer, timestamp_ms))
    if kind is FindingType.BAD_CRC:
        damaged[-1] ^= 0xFF
    elif kind is FindingType.CORRUPT_BATCH:
        damaged[MAGIC_POS] = 1
    elif kind is FindingType.TORN_BATCH:
        name, position = writer.append(bytes(damaged[:len(damaged) // 2]), 1)
        writer.roll()
        return Finding(kind, p, segment=name, position=position)
    name, position = writer.append(bytes(damaged), 1)
    return Finding(kind, p, segment=name, position=position)


def generate(data_dir: str | Path, config: GeneratorConfig = GeneratorConfig()) -> Manifest:
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    manifest = Manifest()
    plans = _plans(config)
    by_partition: dict[int, list[_Plan]] = defaultdict(list)
    for plan in plans:
        by_partition[partition_for(plan.name, config.num_partitions)].append(plan)
    normal = sum(1 for p in plans if p.kind in ("normal", "below", "above"))
    budget = max(1, config.records // max(normal, 1))
    rng = random.Random(config.seed)
    integrity_at = defaultdict(list)
    if config.integrity:
        used = sorted(by_partition)
        for kind in INTEGRITY_KINDS:
            for _ in range(config.per_type):
                integrity_at[rng.choice(used)].append(kind)
    torn_files = rng.sample(sorted(by_partition), min(config.per_type, len(by_partition))) \
        if config.integrity else []
    tails = set(rng.sample(sorted(by_partition), min(3, len(by_partition)))) if config.partial_tail else set()
    top_offsets: dict[tuple[str, int], int] = {}
    for partition in range(config.num_partitions):
        writer = _PartitionWriter(data_dir / f"{TOPIC}-{partition}", partition, config.segment_bytes)
        events: list[tuple[int, int, _Event]] = []
        for plan in by_partition.get(partition, ()):
            g = _Group(plan.name, random.Random(f"{config.seed}/{plan.name}"), partition)
            if plan.kind == "orphan":
                _orphan_life(g, config, manifest.expected)
            elif plan.kind == "simple":
                _simple_life(g, config, manifest.expected)
            elif plan.kind == "leftover":
                _leftover_life(g, config, manifest.expected)
            elif plan.kind == "retired":
                _retired_life(g, config, manifest.expected)
            elif plan.kind == "abandoned":
                _abandoned_life(g, config, manifest.expected)
            elif plan.kind == "epochs":
                _member_epochs_life(g, config)
            else:
                _normal_life(g, config, budget, plan.kind, plan)
            _upstream_expectations(g, plan, manifest, top_offsets)
            events += [(e.timestamp_ms, len(events) + i, e) for i, e in enumerate(g.events)]
        events.sort(key=lambda e: (e[0], e[1]))
        injections = _spread(integrity_at.get(partition, []), len(events), rng)
        for i, (_ts, _seq, event) in enumerate(events):
            for kind in injections.get(i, ()):
                manifest.expected.append(_inject(writer, kind, event.timestamp_ms))
            base = writer.write(event, config.headers)
            manifest.records += len(event.records)
            for index, finding in event.expect:
                if config.headers or finding.type is not FindingType.STALE_GENERATION_COMMIT:
                    manifest.expected.append(_with_offset(finding, base + index))
        tail = b""
        if partition in tails:
            tail = _filler(writer, config.now_ms)[:40]
        writer.flush(tail)
        if partition in torn_files:
            name = segment_name(writer.segments[-1][0]) + TORN_SUFFIX + "1"
            (writer.directory / name).write_bytes(_filler(writer, config.now_ms)[:30])
            manifest.expected.append(Finding(FindingType.TORN_BATCH, partition, segment=name, position=0))
        manifest.next_offsets[partition] = writer.next_offset
    manifest.log_offsets = _log_offsets(config, top_offsets, manifest)
    return manifest


def _spread(kinds: list[FindingType], events: int, rng: random.Random) -> dict[int, list[FindingType]]:
    at: dict[int, list[FindingType]] = defaultdict(list)
    for kind in kinds:
        # Never before the first event: a duplicate needs a batch to copy.
        at[rng.randint(1, max(1, events - 1))].append(kind)
    return at


def _with_offset(finding: Finding, record_offset: int) -> Finding:
    return Finding(finding.type, finding.log_partition, finding.group, finding.topic, finding.partition,
                   record_offset)


def _upstream_expectations(g: _Group, plan: _Plan, manifest: Manifest,
                           top_offsets: dict[tuple[str, int], int]) -> None:
    for key, offset in g.positions.items():
        top_offsets[key] = max(top_offsets.get(key, 0), offset)
        if plan.kind == "below":
            manifest.expected.append(Finding(FindingType.OFFSET_BELOW_LOG_START, g.log_partition, g.name, *key))
        elif plan.kind == "above":
            manifest.expected.append(Finding(FindingType.OFFSET_ABOVE_LOG_END, g.log_partition, g.name, *key))


def _log_offsets(config: GeneratorConfig, top_offsets: dict[tuple[str, int], int],
                 manifest: Manifest) -> dict[tuple[str, int], tuple[int, int]]:
    """Log bounds that every normal committed offset lies within (offsets of deleted or
    regressed commits included, so any final offset is inside)."""
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for (topic, partition), top in top_offsets.items():
        if topic.startswith("below-"):
            bounds[topic, partition] = (top + 100, top + 200)
        elif topic.startswith("above-"):
            bounds[topic, partition] = (0, max(top - 1, 0))
        else:
            bounds[topic, partition] = (0, top + 1000)
    for t in range(config.topics):
        for p in range(config.partitions_per_topic):
            bounds.setdefault((f"topic-{t}", p), (0, 10**9))
    return bounds


def expected_identities(findings: Iterable[Finding]) -> set[tuple]:
    return {f.identity() for f in findings}
