"""What each finding type means and what to do about it, for the report and `kgc audit`'s
output; and the human units the report shows durations and sizes in.

Findings come in three kinds: integrity (the log files are damaged: act, kgc's data is at
stake), hygiene (offsets and groups that are stale, regressed or left behind: look, they are
usually a client's doing and often harmless) and upstream (offsets checked against the Kafka
cluster's logs, which only an audit given `--upstream` can do).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from coordinator.offline.findings import INTEGRITY_TYPES, UPSTREAM_TYPES, FindingType

INTEGRITY = "integrity"
HYGIENE = "hygiene"
UPSTREAM = "upstream"
KIND_TITLES = {
    INTEGRITY: "Integrity: damage in the log files",
    HYGIENE: "Hygiene: offsets and groups",
    UPSTREAM: "Against the upstream cluster's logs",
}


class Guide(NamedTuple):
    meaning: str
    action: str


GUIDES: dict[FindingType, Guide] = {
    FindingType.OFFSET_REGRESSION: Guide(
        "a commit went below the group's previous offset for the partition",
        "usually a reset (kgc groups reset-offsets) or a consumer that seeked back; if nobody did, the "
        "member and client named show who re-read data"),
    FindingType.STALE_GENERATION_COMMIT: Guide(
        "a commit written by a member of an older generation than the group's (KIP-848 groups: with an "
        "older member epoch than the member's own)",
        "a consumer that missed a rebalance (long pauses, session timeouts): look at its client and "
        "max.poll.interval.ms; duplicates downstream are possible"),
    FindingType.ORPHANED_OFFSET: Guide(
        "offsets of a group that has no group metadata (and did not commit as a simple group)",
        "harmless to kgc; expiry removes them, or delete them with kgc groups delete-offsets"),
    FindingType.OFFSET_OF_DELETED_GROUP: Guide(
        "offsets still in the log after their group was deleted",
        "compaction removes them; nothing to do unless they keep coming back (a client still committing)"),
    FindingType.OFFSET_PAST_RETENTION: Guide(
        "an offset kgc's retention (offsets_retention_ms) would delete now",
        "expected for idle groups; raise offsets_retention_ms if those groups must keep their place"),
    FindingType.EMPTY_GROUP_PAST_RETENTION: Guide(
        "a group empty for longer than the retention",
        "kgc deletes it at its next retention check; nothing to do unless it should still exist"),
    FindingType.OPEN_TRANSACTION: Guide(
        "transactional offsets (TxnOffsetCommit) with no COMMIT or ABORT marker after them: still pending",
        "normal for a transaction in flight when the copy was taken; if kgc is running and it stays, check "
        "kgc's log for its tail of kgc-txn-offsets (docs/exactly-once.md)"),
    FindingType.BAD_CRC: Guide(
        "a batch whose checksum does not match: its bytes changed on disk",
        "check the disk; restore the partition from a copy or kgc compact it (the bad batch is named)"),
    FindingType.TORN_BATCH: Guide(
        "a batch cut short, as a crash mid-write leaves (recovery cuts it off at the next start)",
        "nothing after a crash: kgc serve recovers it; if the process did not crash, check the disk"),
    FindingType.CORRUPT_BATCH: Guide(
        "a batch with an impossible length or magic byte",
        "check the disk and what else writes to the data dir; restore from a copy or kgc compact"),
    FindingType.NON_INCREASING_OFFSETS: Guide(
        "batch offsets that go backwards: the log was written out of order",
        "stop kgc and check nothing else wrote to the data dir (two kgc on one directory?)"),
    FindingType.UNDECODABLE_RECORD: Guide(
        "a record that is not in the __consumer_offsets key/value formats",
        "a writer other than kgc or a newer format: keep the data dir and report it"),
    FindingType.OFFSET_BELOW_LOG_START: Guide(
        "a committed offset below the partition's log start: retention deleted records the group never read",
        "the group lost data: give the topic longer retention or the consumers more capacity"),
    FindingType.OFFSET_ABOVE_LOG_END: Guide(
        "a committed offset above the partition's log end: impossible for a consumer that read it",
        "the topic was recreated or truncated, or offsets were set by hand: reset the group "
        "(kgc groups reset-offsets)"),
    FindingType.OFFSET_OF_DELETED_TOPIC: Guide(
        "a committed offset of a topic the cluster no longer has: the topic was deleted under the group",
        "if the topic is gone for good, delete the group's offsets of it (kgc groups delete-offsets); if it "
        "comes back under the same name, its new log starts at 0 and this offset is wrong for it"),
    FindingType.OFFSET_OF_RECREATED_TOPIC: Guide(
        "a committed offset of a topic since deleted and created again under the same name: the commit "
        "recorded the old topic's id (commits naming topics by id, OffsetCommit v10, record it)",
        "the offset points into the old topic's log, not the new one's: reset the group's offsets of the "
        "topic (kgc groups reset-offsets) or delete them (kgc groups delete-offsets)"),
}


def kind_of(finding_type: FindingType) -> str:
    if finding_type in INTEGRITY_TYPES:
        return INTEGRITY
    return UPSTREAM if finding_type in UPSTREAM_TYPES else HYGIENE


def human_duration(ms: int) -> str:
    """The two largest units: 604800000 -> '7 d', 93784000 -> '1 d 2 h', 1500 -> '1.5 s'."""
    if ms < 60_000:
        return f"{ms / 1000:g} s" if ms % 1000 else f"{ms // 1000} s"
    parts = []
    rest = ms // 1000
    for unit, seconds in (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)):
        if rest >= seconds:
            parts.append(f"{rest // seconds} {unit}")
            rest %= seconds
    return " ".join(parts[:2])


def human_bytes(n: int) -> str:
    """Decimal units: 999 -> '999 B', 12_345_678 -> '12.3 MB'."""
    size, unit = float(n), "B"
    for bigger in ("KB", "MB", "GB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


_DURATION = re.compile(r"\b(\d+) (ms|s)\b")


def human_detail(text: str) -> str:
    """A finding's detail with its durations in human units ('expired by 604800000 ms
    retention' -> 'expired by 7 d retention')."""
    return _DURATION.sub(lambda m: human_duration(int(m[1]) * (1 if m[2] == "ms" else 1000)), text)
