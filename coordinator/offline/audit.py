"""The audit of one partition: replay its records in offset order and say what is wrong.

Replay follows the loader (latest record wins, tombstones delete, control batches and
unknown key types skipped) and checks, record by record:

- offset regression: a commit below the previous commit of the same (group, topic,
  partition);
- stale generation: a commit whose `generation` header is older than the group's
  generation in the last GroupMetadata before it. The coordinator writes GroupMetadata
  when a generation becomes stable and refuses commits from older generations from the
  moment the join completes, so such a commit should never be in the log. Records
  without audit headers (a log Kafka wrote) carry no generation: not judged;
- stale member epoch (KIP-848 consumer groups, the same finding type): a commit whose
  member's last current-assignment record (type 8) before it gives a newer member epoch
  than the commit's `generation` header, which carries the member epoch for these groups,
  and an epoch older than the one the member was given any partition it holds at. The
  coordinator accepts an older epoch for partitions the member was given at that epoch
  or before (KIP-1251), and the log names a commit's topic while the record names topic
  ids, so only an epoch older than all of the member's is sure to be refused. A record
  without assignment epochs (an older coordinator's) counts its partitions as given at
  the member's previous epoch, which older kgc accepted for partitions still held.

At the end, over the final state, offsets whose group has no GroupMetadata:

- offsets of a deleted group: the group's GroupMetadata was deleted (a tombstone) and
  these offsets were left behind, or committed after it;
- orphaned offsets: the group never had GroupMetadata in the log.

Where the commit carries kgc's audit headers, only commits from a group member (a member
id or a generation >= 0) are judged: a *simple* group (generation -1: an admin tool or an
`assign()` consumer) has no GroupMetadata in Kafka either. A log Kafka wrote has no
headers, so every such offset is reported, and an orphan's detail says it may be a simple
group's. Groups of Kafka 4's newer protocols (KIP-848 consumer, share and streams groups,
record types 3 and up) have their own records instead of GroupMetadata: they count as
having metadata until their type-3 record is deleted. And:

- offsets past retention: exactly what kgc's own expiry would delete at `now_ms`. The
  final state is replayed into a real `GroupShard` and its `OffsetManager.expire` decides, so
  the audit and the service cannot disagree on KIP-211's rules;
- empty groups past retention: Empty since (current_state_timestamp, or the time of
  its last GroupMetadata when that is unknown) at least the retention ago;
- given the upstream cluster's log start/end offsets: committed offsets below the log
  start (deleted before the group read them) or above the log end, and the lag; offsets
  of topics the cluster no longer has; and, given its topic ids, offsets whose commit
  recorded another id than the topic's now (it was deleted and created again since).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from coordinator import records
from coordinator.group.config import GroupConfig
from coordinator.group.errors import CorruptStateError
from coordinator.group.shard import GroupShard
from coordinator.offline.findings import Finding, FindingType
from coordinator.offline.record_values import consumer_group_value, value_as
from coordinator.offline.scan import ScannedBatch
from coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupValue,
    CoordinatorRecord,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    new_group_metadata_record,
    new_offset_commit_record,
)

log = logging.getLogger(__name__)

# (topic, partition) -> (log start offset, log end offset) on the upstream cluster.
LogOffsets = Mapping[tuple[str, int], tuple[int, int]]
# topic -> its id on the upstream cluster (Metadata v10+), for the topics it has.
TopicIds = Mapping[str, uuid.UUID]

HISTORY_COLUMNS = ("log_partition", "record_offset", "timestamp_ms", "group", "topic", "partition",
                   "offset", "leader_epoch", "metadata", "commit_timestamp_ms", "expire_timestamp_ms",
                   "member_id", "generation", "client_id", "client_host")


@dataclass(frozen=True, slots=True)
class Writer:
    """Who wrote a record, from its audit headers; None where a header is missing."""

    member_id: str | None = None
    generation: int | None = None
    client_id: str | None = None
    client_host: str | None = None

    @classmethod
    def from_headers(cls, headers: tuple[tuple[str, bytes | None], ...]) -> Writer:
        if not headers:
            return _NO_WRITER
        found = {name: value.decode("utf-8", "replace") for name, value in headers if value is not None}
        generation = found.get("generation")
        try:
            gen = None if generation is None else int(generation)
        except ValueError:
            gen = None
        return cls(found.get("member_id"), gen, found.get("client_id"), found.get("client_host"))


_NO_WRITER = Writer()


def _from_a_member(writer: Writer) -> bool:
    if writer.generation is None:
        return False
    return writer.generation >= 0 or bool(writer.member_id)


def stale_epoch_detail(epoch: int, member: MemberEpoch) -> str:
    return f"member epoch {epoch}, member at {member.epoch} since offset {member.record_offset}"


def _has_audit_headers(writer: Writer) -> bool:
    return writer.generation is not None or writer.member_id is not None


SIMPLE_GROUP_NOTE = ("the group never had GroupMetadata; without audit headers the commit's "
                     "writer is unknown: it may be a simple group (an assign() consumer or an admin tool)")


@dataclass(frozen=True, slots=True)
class Committed:
    value: OffsetCommitValue
    record_offset: int
    timestamp_ms: int
    writer: Writer


@dataclass(frozen=True, slots=True)
class MemberEpoch:
    """A KIP-848 member's epochs from its last current-assignment record (type 8)."""
    epoch: int
    given_from: int         # the oldest epoch it was given a partition it holds at
    record_offset: int

    @classmethod
    def of(cls, value: ConsumerGroupCurrentMemberAssignmentValue, record_offset: int) -> MemberEpoch:
        own = max(value.member_epoch, 0)
        unrecorded = value.previous_member_epoch if value.previous_member_epoch > 0 else own
        given = [min(epochs) if epochs is not None and len(epochs) == len(partitions) else unrecorded
                 for topics in (value.assigned_partitions, value.partitions_pending_revocation)
                 for _, partitions, epochs in topics if partitions]
        return cls(value.member_epoch, min(given, default=own), record_offset)

    def refuses(self, epoch: int) -> bool:
        """Whether the coordinator refuses a commit at `epoch` from this member
        (STALE_MEMBER_EPOCH), as far as the log can tell."""
        return epoch < self.epoch and epoch < self.given_from


@dataclass(frozen=True, slots=True)
class GroupRecord:
    value: GroupMetadataValue
    record_offset: int
    timestamp_ms: int


@dataclass(slots=True)
class AuditResult:
    findings: list[Finding]
    final_offsets: list[dict]
    groups: list[dict]
    history: dict[str, list]
    records: int
    skipped_records: int
    rebalances: list[dict]


class _NoTimer:
    """The audit asks the shard only to judge expiry, which schedules nothing it needs."""

    def schedule(self, key, delay_ms, op) -> None:
        pass

    def cancel(self, key) -> None:
        pass

    def is_scheduled(self, key) -> bool:
        return False


@dataclass(slots=True)
class PartitionAudit:
    partition: int
    now_ms: int
    offsets_retention_ms: int
    log_offsets: LogOffsets | None = None
    since_ms: int | None = None            # report what records from then on show
    until_ms: int | None = None            # read no record from then on
    keep_history: bool = True
    topic_ids: TopicIds | None = None       # the upstream's topic ids, with log_offsets
    findings: list[Finding] = field(default_factory=list)
    offsets: dict[tuple[str, str, int], Committed] = field(default_factory=dict)
    groups: dict[str, GroupRecord] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)      # group -> offset of its GroupMetadata tombstone
    other_protocol: set[str] = field(default_factory=set)      # groups with type 3+ records
    member_epochs: dict[tuple[str, str], MemberEpoch] = field(default_factory=dict)   # (group, member id)
    history: dict[str, list] = field(default_factory=lambda: {c: [] for c in HISTORY_COLUMNS})
    rebalances: list[dict] = field(default_factory=list)
    records: int = 0
    skipped_records: int = 0
    # producer id → (first offset, segment, position) of its transactional offsets not yet
    # followed by its COMMIT or ABORT marker (TxnOffsetCommit, coordinator/txn)
    open_transactions: dict[int, tuple[int, str | None, int | None]] = field(default_factory=dict)

    def transaction_batch(self, producer_id: int, control: bool, base_offset: int, segment: str | None,
                          position: int | None) -> None:
        if control:
            self.open_transactions.pop(producer_id, None)
        else:
            self.open_transactions.setdefault(producer_id, (base_offset, segment, position))

    def in_window(self, timestamp_ms: int) -> bool:
        return self.since_ms is None or timestamp_ms >= self.since_ms

    def add(self, scanned: ScannedBatch) -> None:
        batch = scanned.batch
        if batch.is_transactional:
            self.transaction_batch(batch.producer_id, batch.is_control, batch.base_offset, scanned.segment,
                                   scanned.position)
        if batch.is_control:
            self.skipped_records += len(batch.records)
            return
        until_ms = self.until_ms
        for stored in batch.records:
            if until_ms is not None and stored.timestamp_ms >= until_ms:
                continue
            self.records += 1
            try:
                decoded = records.deserialize(stored.key, stored.value)
            except records.RecordDecodeError as e:
                if not self.in_window(stored.timestamp_ms):
                    continue
                self.findings.append(Finding(
                    FindingType.UNDECODABLE_RECORD, self.partition, record_offset=stored.offset,
                    timestamp_ms=stored.timestamp_ms, segment=scanned.segment, position=scanned.position,
                    detail=str(e)))
                continue
            if decoded is None or isinstance(decoded[0], records.AdoptedGroupKey):   # kgc's own bookkeeping
                self.skipped_records += 1
                assert stored.key is not None, "records.deserialize refuses a keyless record"
                self.other_record(stored.key, stored.value is None, stored.offset)
                continue
            key, value = decoded
            if isinstance(key, OffsetCommitKey):
                self._offset_commit(key, value_as(OffsetCommitValue, value), stored.offset, stored.timestamp_ms,
                                    Writer.from_headers(stored.headers))
            elif isinstance(key, ConsumerGroupKey):
                self.consumer_group_record(key, consumer_group_value(value), stored.offset)
            else:
                self.group_metadata(key.group, value_as(GroupMetadataValue, value), stored.offset,
                                    stored.timestamp_ms)

    def group_metadata(self, group: str, value: GroupMetadataValue | None, record_offset: int,
                       timestamp_ms: int) -> None:
        if self.in_window(timestamp_ms):
            self.rebalances.append({
                "log_partition": self.partition, "group": group, "record_offset": record_offset,
                "timestamp_ms": timestamp_ms, "generation": None if value is None else value.generation,
                "members": None if value is None else len(value.members),
                "protocol": None if value is None else value.protocol, "leader": None if value is None else value.leader})
        if value is None:
            if self.groups.pop(group, None) is not None:
                self.deleted[group] = record_offset
        else:
            self.groups[group] = GroupRecord(value, record_offset, timestamp_ms)
            self.deleted.pop(group, None)

    def other_record(self, key: bytes, tombstone: bool, record_offset: int) -> None:
        found = records.other_record_group(key)
        if found is None:
            return
        record_type, group = found
        self._other_protocol(record_type == records.CONSUMER_GROUP_METADATA_KEY_TYPE, group, tombstone, record_offset)

    def consumer_group_record(self, key: ConsumerGroupKey, value: ConsumerGroupValue | None,
                              record_offset: int) -> None:
        if isinstance(key, records.ConsumerGroupCurrentMemberAssignmentKey):
            assignment = value_as(ConsumerGroupCurrentMemberAssignmentValue, value)
            if assignment is None:
                self.member_epochs.pop((key.group, key.member_id), None)
            else:
                self.member_epochs[key.group, key.member_id] = MemberEpoch.of(assignment, record_offset)
        self._other_protocol(isinstance(key, records.ConsumerGroupMetadataKey), key.group, value is None,
                             record_offset)

    def _other_protocol(self, group_record: bool, group: str, tombstone: bool, record_offset: int) -> None:
        """A record of a KIP-848 (or share, streams) group: the group exists until its
        group record (type 3) is deleted."""
        if not tombstone:
            self.other_protocol.add(group)
            self.deleted.pop(group, None)
        elif group_record and group in self.other_protocol:
            self.other_protocol.discard(group)
            self.deleted[group] = record_offset

    def _offset_commit(self, key: OffsetCommitKey, value: OffsetCommitValue | None, record_offset: int,
                       timestamp_ms: int, writer: Writer) -> None:
        reported = self.in_window(timestamp_ms)
        if self.keep_history and reported:
            self._record_history(key, value, record_offset, timestamp_ms, writer)
        tp = (key.group, key.topic, key.partition)
        if value is None:
            self.offsets.pop(tp, None)
            return
        previous = self.offsets.get(tp)
        if reported and previous is not None and value.offset < previous.value.offset:
            self._finding(FindingType.OFFSET_REGRESSION, key, value, record_offset, timestamp_ms, writer,
                          previous_offset=previous.value.offset,
                          detail=f"{previous.value.offset} -> {value.offset}")
        group = self.groups.get(key.group)
        if (reported and writer.generation is not None and writer.generation >= 0 and group is not None
                and writer.generation < group.value.generation):
            self._finding(FindingType.STALE_GENERATION_COMMIT, key, value, record_offset, timestamp_ms, writer,
                          detail=f"generation {writer.generation}, group at {group.value.generation} "
                                 f"since offset {group.record_offset}")
        member = self.member_epochs.get((key.group, writer.member_id)) if writer.member_id else None
        if (reported and member is not None and writer.generation is not None and writer.generation >= 0
                and member.refuses(writer.generation)):
            self._finding(FindingType.STALE_GENERATION_COMMIT, key, value, record_offset, timestamp_ms, writer,
                          detail=stale_epoch_detail(writer.generation, member))
        self.offsets[tp] = Committed(value, record_offset, timestamp_ms, writer)

    def _record_history(self, key: OffsetCommitKey, value: OffsetCommitValue | None, record_offset: int,
                        timestamp_ms: int, writer: Writer) -> None:
        h = self.history
        h["log_partition"].append(self.partition)
        h["record_offset"].append(record_offset)
        h["timestamp_ms"].append(timestamp_ms)
        h["group"].append(key.group)
        h["topic"].append(key.topic)
        h["partition"].append(key.partition)
        h["offset"].append(None if value is None else value.offset)
        h["leader_epoch"].append(None if value is None else value.leader_epoch)
        h["metadata"].append(None if value is None else value.metadata)
        h["commit_timestamp_ms"].append(None if value is None else value.commit_timestamp_ms)
        h["expire_timestamp_ms"].append(None if value is None else value.expire_timestamp_ms)
        h["member_id"].append(writer.member_id)
        h["generation"].append(writer.generation)
        h["client_id"].append(writer.client_id)
        h["client_host"].append(writer.client_host)

    def _finding(self, kind: FindingType, key: OffsetCommitKey, value: OffsetCommitValue, record_offset: int,
                 timestamp_ms: int, writer: Writer, previous_offset: int | None = None,
                 detail: str = "") -> None:
        self.findings.append(Finding(
            kind, self.partition, key.group, key.topic, key.partition, record_offset, value.offset,
            previous_offset, timestamp_ms, writer.member_id, writer.generation, writer.client_id,
            writer.client_host, detail=detail))

    # ------------------------------------------------------------------ final state

    def finish(self, integrity: Sequence[Finding] = ()) -> AuditResult:
        for (group, topic, partition), committed in self.offsets.items():
            if group not in self.groups and group not in self.other_protocol:
                self._groupless_offset(group, topic, partition, committed)
        for tp in self._expired_offsets():
            self._final_finding(FindingType.OFFSET_PAST_RETENTION, *tp, self.offsets[tp],
                                f"expired by {self.offsets_retention_ms} ms retention")
        for group, record in self.groups.items():
            empty_since = self._empty_since(record)
            if empty_since is not None and self.now_ms - empty_since >= self.offsets_retention_ms:
                self.findings.append(Finding(
                    FindingType.EMPTY_GROUP_PAST_RETENTION, self.partition, group,
                    record_offset=record.record_offset, timestamp_ms=empty_since,
                    generation=record.value.generation,
                    detail=f"empty for {(self.now_ms - empty_since) // 1000} s"))
        for producer_id, (first, segment, position) in self.open_transactions.items():
            self.findings.append(Finding(
                FindingType.OPEN_TRANSACTION, self.partition, record_offset=first, segment=segment,
                position=position, detail=f"producer {producer_id}: transactional offsets from offset {first} on "
                                          "have no COMMIT or ABORT marker after them (still pending)"))
        if self.log_offsets is not None:
            self._upstream_findings(self.log_offsets)
        final_offsets = [self._final_row(tp, committed) for tp, committed in self.offsets.items()]
        return AuditResult(list(integrity) + self.findings, final_offsets, self._group_rows(), self.history,
                           self.records, self.skipped_records, self.rebalances)

    def _groupless_offset(self, group: str, topic: str, partition: int, committed: Committed) -> None:
        headers = _has_audit_headers(committed.writer)
        if headers and not _from_a_member(committed.writer):
            return
        deleted_at = self.deleted.get(group)
        if deleted_at is not None:
            when = "after" if committed.record_offset > deleted_at else "before"
            self._final_finding(FindingType.OFFSET_OF_DELETED_GROUP, group, topic, partition, committed,
                                f"committed {when} the group's GroupMetadata was deleted at offset {deleted_at}")
        elif headers:
            self._final_finding(FindingType.ORPHANED_OFFSET, group, topic, partition, committed,
                                "committed by a group member, but the group has no GroupMetadata")
        else:
            self._final_finding(FindingType.ORPHANED_OFFSET, group, topic, partition, committed,
                                SIMPLE_GROUP_NOTE)

    def _upstream_findings(self, log_offsets: LogOffsets) -> None:
        # A topic the cluster answered nothing for is gone (a partition of a topic it has
        # but could not bound, leaderless say, is only left unjudged).
        topics = {topic for topic, _partition in log_offsets}
        for (group, topic, partition), committed in self.offsets.items():
            if topic not in topics:
                self._final_finding(FindingType.OFFSET_OF_DELETED_TOPIC, group, topic, partition, committed,
                                    "the cluster has no such topic")
                continue
            recreated = self._recreated(topic, committed)
            if recreated is not None:
                self._final_finding(FindingType.OFFSET_OF_RECREATED_TOPIC, group, topic, partition, committed,
                                    f"committed to topic id {committed.value.topic_id}; the cluster's {topic} "
                                    f"is topic id {recreated}")
                continue
            bounds = log_offsets.get((topic, partition))
            if bounds is None:
                continue
            start, end = bounds
            if committed.value.offset < start:
                self._final_finding(FindingType.OFFSET_BELOW_LOG_START, group, topic, partition, committed,
                                    f"log starts at {start}", previous_offset=start)
            elif committed.value.offset > end:
                self._final_finding(FindingType.OFFSET_ABOVE_LOG_END, group, topic, partition, committed,
                                    f"log ends at {end}", previous_offset=end)

    def _recreated(self, topic: str, committed: Committed) -> uuid.UUID | None:
        """The cluster's id of `topic` when the commit recorded another (the topic was
        deleted and created again since); None when it did not, or either is unknown."""
        recorded = committed.value.topic_id
        if recorded is None or not self.topic_ids:
            return None
        live = self.topic_ids.get(topic)
        return live if live is not None and live != recorded else None

    @staticmethod
    def _empty_since(record: GroupRecord) -> int | None:
        if record.value.members:
            return None
        stamped = record.value.current_state_timestamp_ms
        return stamped if stamped >= 0 else record.timestamp_ms

    def _expired_offsets(self) -> list[tuple[str, str, int]]:
        now_ms = self.now_ms
        shard = GroupShard(self.partition, GroupConfig(offsets_retention_ms=self.offsets_retention_ms),
                           _NoTimer(), lambda: now_ms, lambda client_id: client_id)
        for group, record in self.groups.items():
            try:
                shard.replay(record.record_offset, new_group_metadata_record(group, record.value, headers=()))
            except CorruptStateError as e:
                # Its offsets are then judged as a simple group's: by commit time.
                log.warning("partition %d: group %s does not load (%s)", self.partition, group, e)
        for (group, topic, partition), committed in self.offsets.items():
            shard.replay(committed.record_offset,
                         new_offset_commit_record(group, topic, partition, committed.value, headers=()))
        expired: list[tuple[str, str, int]] = []
        for group in list(shard.groups):
            tombstones: list[CoordinatorRecord] = []
            shard.offsets.expire(group, tombstones)
            expired += [(r.key.group, r.key.topic, r.key.partition) for r in tombstones
                        if isinstance(r.key, OffsetCommitKey)]
        return expired

    def _final_finding(self, kind: FindingType, group: str, topic: str, partition: int, committed: Committed,
                       detail: str, previous_offset: int | None = None) -> None:
        w = committed.writer
        self.findings.append(Finding(
            kind, self.partition, group, topic, partition, committed.record_offset, committed.value.offset,
            previous_offset, committed.timestamp_ms, w.member_id, w.generation, w.client_id, w.client_host,
            detail=detail))

    def _final_row(self, tp: tuple[str, str, int], committed: Committed) -> dict:
        group, topic, partition = tp
        value, w = committed.value, committed.writer
        start = end = lag = None
        bounds = self.log_offsets.get((topic, partition)) if self.log_offsets is not None else None
        if bounds is not None and self._recreated(topic, committed) is None:    # else another topic's bounds
            start, end = bounds
            if value.offset <= end:
                lag = end - value.offset
        return {
            "log_partition": self.partition, "group": group, "topic": topic, "partition": partition,
            "offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
            "commit_timestamp_ms": value.commit_timestamp_ms, "expire_timestamp_ms": value.expire_timestamp_ms,
            "record_offset": committed.record_offset, "timestamp_ms": committed.timestamp_ms,
            "member_id": w.member_id, "generation": w.generation, "client_id": w.client_id,
            "client_host": w.client_host, "log_start_offset": start, "log_end_offset": end, "lag": lag,
            "topic_id": None if value.topic_id is None else str(value.topic_id),
        }

    def _group_rows(self) -> list[dict]:
        offsets_per_group: dict[str, int] = {}
        for group, _topic, _partition in self.offsets:
            offsets_per_group[group] = offsets_per_group.get(group, 0) + 1
        rows = []
        for group in sorted(set(self.groups) | set(offsets_per_group)):
            record = self.groups.get(group)
            value = record.value if record else None
            rows.append({
                "log_partition": self.partition, "group": group,
                "state": "none" if value is None else ("Stable" if value.members else "Empty"),
                "protocol_type": value.protocol_type if value else None,
                "protocol": value.protocol if value else None,
                "generation": value.generation if value else None,
                "leader": value.leader if value else None,
                "members": len(value.members) if value else 0,
                "current_state_timestamp_ms": value.current_state_timestamp_ms if value else None,
                "metadata_record_offset": record.record_offset if record else None,
                "offsets": offsets_per_group.get(group, 0),
            })
        return rows
