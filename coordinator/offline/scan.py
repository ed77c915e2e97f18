"""Reading one partition directory for the audit and compaction, damage and all.

The service refuses a partition at the first damaged batch; the audit wants to see all
of them, so this reader goes on past damage: after a bad batch it resumes at the next
sound one (`format.find_sound_batch`), after a sound batch whose offsets go back it
skips just that batch. Framing and decoding are `storage.format`'s; nothing here parses
bytes itself.

A live data dir is fine to read: every file is read once, whole batches only. Where the
last (active) segment's walk stops is judged by `storage.format.judge_tail`, the rule
recovery applies too: a torn write at its very end is a write in progress, not damage
(`tail_bytes` counts what was left), and its preallocated zeros are the end of its log.
The same in a closed segment is damage: closed segments were cut to their log and
fsynced whole when they rolled.

`<segment>.torn-N` files are bytes a past recovery cut off a torn tail; each is
reported as a torn batch.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.offline.findings import Finding, FindingType
from storage.api import StoredBatch
from storage.format import (
    LOG_OVERHEAD,
    BatchDecodeError,
    StopReason,
    Tail,
    batch_header,
    decode_batch,
    judge_tail,
    sound_batches,
)
from storage.segment import TORN_SUFFIX, parse_segment_name

_STOP_FINDINGS = {
    StopReason.SHORT: FindingType.TORN_BATCH,
    StopReason.BAD_LENGTH: FindingType.CORRUPT_BATCH,
    StopReason.BAD_MAGIC: FindingType.CORRUPT_BATCH,
    StopReason.BAD_CRC: FindingType.BAD_CRC,
    StopReason.OFFSETS_NOT_INCREASING: FindingType.NON_INCREASING_OFFSETS,
    StopReason.ZERO_FILL: FindingType.CORRUPT_BATCH,
}
_overhead = struct.Struct(LOG_OVERHEAD)


def segment_files(directory: Path) -> list[tuple[int, Path]]:
    named = ((parse_segment_name(name), name) for name in os.listdir(directory))
    return sorted((base, directory / name) for base, name in named if base is not None)


def _read_into(f, space: memoryview) -> int:
    """Fill `space` from `f` up to its end; the bytes read."""
    done = 0
    while done < len(space):
        n = f.readinto(space[done:])
        if not n:
            break
        done += n
    return done


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    segment: str
    position: int
    raw: memoryview           # the batch's bytes as stored (compaction copies kept batches)
    batch: StoredBatch


@dataclass(slots=True)
class PartitionScan:
    """Walks a partition's segments in offset order; iterate for the sound batches.

    After iterating: `problems` holds the integrity findings about the segments,
    `evidence` those about `.torn-N` files (the log itself is sound: recovery already cut
    them off), `next_offset` is one past the last sound batch, `tail_bytes` the bytes of
    a write in progress, `bytes_read` the total read.
    """

    partition: int
    directory: Path
    problems: list[Finding] = field(default_factory=list)
    evidence: list[Finding] = field(default_factory=list)
    next_offset: int = 0
    tail_bytes: int = 0
    bytes_read: int = 0

    def __iter__(self) -> Iterator[ScannedBatch]:
        for name, data, active in self.segments():
            yield from self._scan_segment(name, data, active)
        self.torn_files()

    def segments_size(self) -> int:
        """The segments' bytes now (the active segment of a live partition may grow)."""
        return sum(path.stat().st_size for _base, path in segment_files(self.directory))

    def segments(self, into: memoryview | None = None) -> Iterator[tuple[str, bytes | memoryview, bool]]:
        """(name, bytes, active?) of each segment, in offset order. With `into`, each
        segment is read into it after the one before and given as a view of it: as much
        as fits, so an active segment that grew since `into` was sized is read as it was."""
        segments = segment_files(self.directory)
        at = 0
        for index, (base, path) in enumerate(segments):
            # A segment's name is at most its first offset: an empty active segment
            # still says where the next offset is.
            self.next_offset = max(self.next_offset, base)
            data: bytes | memoryview
            with open(path, "rb") as f:
                if into is None:
                    data = f.read()
                else:
                    data = into[at:at + _read_into(f, into[at:])]
                    at += len(data)
            self.bytes_read += len(data)
            yield path.name, data, index == len(segments) - 1

    def torn_files(self) -> None:
        for name in sorted(os.listdir(self.directory)):
            if TORN_SUFFIX in name:
                size = os.path.getsize(self.directory / name)
                self.evidence.append(Finding(
                    FindingType.TORN_BATCH, self.partition, segment=name, position=0,
                    detail=f"{size} bytes cut off a torn tail by recovery"))

    def _scan_segment(self, name: str, data: bytes | memoryview, active: bool) -> Iterator[ScannedBatch]:
        view = memoryview(data)
        for positions in self.sound_runs(name, data, active):
            for position in positions:
                header = batch_header(data, position)
                try:
                    batch = decode_batch(data, position, header)
                except BatchDecodeError as e:
                    self.undecodable(name, position, header.base_offset, e)
                    continue
                yield ScannedBatch(name, position, view[position:position + header.size], batch)

    def undecodable(self, segment: str, position: int, base_offset: int, error: BatchDecodeError) -> None:
        self._problem(FindingType.UNDECODABLE_RECORD, segment, position, error.detail, record_offset=base_offset)

    def sound_runs(self, name: str, data: bytes | memoryview, active: bool) -> Iterator[list[int]]:
        """The positions of the segment's sound batches, run by run between damaged
        places; the damage is recorded in `problems` as it is passed."""
        position = 0
        while position < len(data):
            positions, self.next_offset, stop = sound_batches(data, position, self.next_offset)
            yield positions
            if stop is None:
                return
            if stop.reason is StopReason.OFFSETS_NOT_INCREASING:
                self._problem(_STOP_FINDINGS[stop.reason], name, stop.position, str(stop))
                # The batch itself is sound: skip exactly it.
                _base, batch_length = _overhead.unpack_from(data, stop.position)
                position = stop.position + _overhead.size + batch_length
                continue
            judgement = judge_tail(data, stop, self.next_offset, active)
            if judgement.verdict is Tail.END:
                return
            if judgement.verdict is Tail.TORN:
                self.tail_bytes = judgement.end - stop.position
                return
            self._problem(_STOP_FINDINGS[stop.reason], name, stop.position, str(stop))
            if judgement.sound_at is None:
                return
            position = judgement.sound_at

    def _problem(self, kind: FindingType, segment: str, position: int, detail: str,
                 record_offset: int | None = None) -> None:
        self.problems.append(Finding(kind, self.partition, segment=segment, position=position,
                                     record_offset=record_offset, detail=detail))
