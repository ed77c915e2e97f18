"""One partition's directory of segments: open and recover, write, roll, read, truncate.

Threads. The group-commit writer runs `write_group` and `fsync` in a worker thread, one
call at a time; the cleaner rewrites closed segments in another; reads snapshot on the
event loop. `lock` guards the segment list and each segment's file identity (a rename
over it together with its new size), so a reader opens exactly the bytes it counted.

Recovery (`open`), after ZODB's `read_index`/`_truncate`:
- every closed segment must be whole: closed segments were fsynced when they rolled,
  so any damage there is damage, never a torn write;
- the active segment is scanned to the first batch that is short, has a bad length,
  magic or CRC, or goes back in offsets. Nothing but zeros from there to the end is its
  preallocated tail (below): the end of the log, kept for the next writes. If the batch
  is short, has a bad length or fails its CRC and no sound batch follows, it is a torn
  tail: the cut bytes (up to the last non-zero one) are saved as `<segment>.torn-<N>`
  (fsynced), then the segment is truncated and fsynced. Anything else refuses the
  partition with a `CorruptLogError` naming the file and byte position: never guess.

Preallocation (`preallocate_bytes`, the store sets it under `fsync always`). The active
segment is written at explicit positions and extended with zeros ahead of its log, a
chunk at a time, so most appends land inside the file and change no size: syncing
them is an `fdatasync`, which then has no metadata to commit. A write that extends the
file is synced with `fsync`. A segment is truncated to its log when it rolls, before
it is checksummed into the manifest, so closed segments, the manifest and everything
made from closed segments never see zeros; a zero tail in a closed segment is damage.

Closed segments are also checked against `segments.manifest` (`storage.manifest`):
what each must be (length, last offset, CRC-32) was recorded when it closed, so a closed
segment truncated at a batch boundary, emptied, deleted, or changed refuses the
partition with a `CorruptLogError` naming the file, the byte position and the offsets
lost; `verify` repeats the check on a running log. `accept_loss` (kgc repair) is the
explicit way back: it keeps what is on disk and records it as the new truth.

Durability marks. `durable_segment`/`durable_size`/`durable_next_offset` say how far
the log is known good: what the last completed group commit covered. Reads stop there,
the cleaner stays behind it, and `truncate_to_durable` (after a failed write) cuts the
log back to it, dropping segments a failed roll created.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

from storage.api import CorruptLogError, DurableRead, RecordFields, StorageError, StoredBatch
from storage.format import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchDecodeError,
    BatchHeader,
    BatchReader,
    ScanStop,
    StopReason,
    Tail,
    decode_batch,
    judge_tail,
    record_fields,
)
from storage.manifest import (
    MANIFEST_NAME,
    MANIFEST_NEW_SUFFIX,
    Manifest,
    SegmentState,
    checksum,
    file_checksum,
)
from storage.segment import (
    CLEANED_SUFFIX,
    LOG_SUFFIX,
    READ_CHUNK_BYTES,
    SWAP_SUFFIX,
    TORN_SUFFIX,
    Segment,
    SegmentIO,
    mapped,
    parse_segment_name,
    segment_name,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartitionLog:
    def __init__(self, directory: Path, segment_bytes: int, io: SegmentIO, preallocate_bytes: int = 0):
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.preallocate_bytes = preallocate_bytes
        self.io = io
        self.lock = threading.Lock()
        self.segments: list[Segment] = []
        self.next_offset = 0                 # the next offset append assigns (event loop)
        self.durable_segment: Segment | None = None
        self.durable_size = 0
        self.durable_next_offset = 0
        self._fd: int | None = None          # the active segment, written at its log's end
        self._allocated = 0                  # the active segment's file size (zeros past its log)
        self._resized = False                # the file size changed since the last sync
        self.manifest = Manifest(directory, io)

    def _active_fd(self) -> int:
        if self._fd is None:
            raise StorageError(f"{self.directory.name}: the log is not open")
        return self._fd

    def _durable(self) -> Segment:
        # Set by `open`, which comes before any write or read.
        if self.durable_segment is None:
            raise StorageError(f"{self.directory.name}: the log is not open")
        return self.durable_segment

    # -- open and recover ---------------------------------------------------------------

    def open(self) -> None:
        self.close()
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        swapped = self._remove_leftovers()
        bases = sorted(b for b in map(parse_segment_name, os.listdir(self.directory)) if b is not None)
        if not bases:
            self._create_segment(0)
            bases = [0]
        segments = [Segment(self.directory / segment_name(b), b, 0) for b in bases]
        # A finished Kafka swap rewrote segments the manifest knew: record them anew.
        manifest = Manifest(self.directory, self.io) if swapped else Manifest(self.directory, self.io).load()
        _check_present(manifest, self.directory, bases)
        next_offset = 0
        states: dict[int, SegmentState] = {}
        for segment in segments[:-1]:
            first_offset = next_offset
            next_offset, states[segment.base_offset] = self._scan_closed(segment, next_offset)
            _check_closed(manifest, segment, states[segment.base_offset], first_offset)
        active = segments[-1]
        if active.base_offset in manifest.closed:
            # Recorded closed, but no later segment exists: a failed roll, cut back. It is
            # checked like a closed one before it takes appends again.
            first_offset = next_offset
            next_offset, state = self._scan_closed(active, next_offset)
            _check_closed(manifest, active, state, first_offset)
        next_offset = max(self._scan_active(active, next_offset), active.base_offset)
        self._record_manifest(manifest, states, active.base_offset)
        with self.lock:
            self.segments = segments
        self._fd = self.io.open_segment(active.path)
        self._allocated = os.fstat(self._fd).st_size
        self._resized = False
        self.next_offset = next_offset
        self.mark_durable(active, active.size, next_offset)

    def _remove_leftovers(self) -> bool:
        """Whether a `.swap` was finished."""
        swapped = False
        for name in sorted(os.listdir(self.directory)):
            path = self.directory / name
            if name.endswith(LOG_SUFFIX + CLEANED_SUFFIX):
                # A compaction that did not reach its rename: the original is intact.
                log.info("removing unfinished compaction output %s", path)
                self.io.unlink(path)
            elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                self._finish_swap(path)
                swapped = True
            elif name == MANIFEST_NAME + MANIFEST_NEW_SUFFIX:
                # A manifest save that did not reach its rename: the old one is whole.
                self.io.unlink(path)
        self.io.fsync_dir(self.directory)
        return swapped

    def _finish_swap(self, swap: Path) -> None:
        """A `.swap` is a complete, fsynced replacement for the segments its offsets
        cover (Kafka's cleaner writes them): drop those segments and put it in place."""
        target = swap.with_name(swap.name.removesuffix(SWAP_SUFFIX))
        base = parse_segment_name(target.name)
        if base is None:
            return
        with open(swap, "rb") as f:
            data = f.read()
        reader = BatchReader(data).scan()
        if reader.stop is not None:
            raise CorruptLogError(str(swap), reader.stop.position, f"unfinished swap: {reader.stop}")
        last_offset = reader.next_offset - 1
        for name in os.listdir(self.directory):
            other = parse_segment_name(name)
            if other is not None and base < other <= last_offset:
                log.info("removing segment %s replaced by %s", name, swap.name)
                self.io.unlink(self.directory / name)
        self.io.replace(swap, target)

    def _scan_closed(self, segment: Segment, min_offset: int) -> tuple[int, SegmentState]:
        with mapped(segment.path) as buf:
            reader = BatchReader(buf, 0, max(min_offset, segment.base_offset)).scan()
            if reader.stop is not None:
                stop = reader.stop
                raise CorruptLogError(str(segment.path), stop.position,
                                      f"closed segment: {stop.reason.value} ({stop.detail})")
            segment.size = reader.end
            return reader.next_offset, SegmentState(reader.end, reader.next_offset - 1, checksum(buf[:reader.end]))

    def _record_manifest(self, manifest: Manifest, states: dict[int, SegmentState], active_base: int) -> None:
        """What open found is now what the manifest says (each state it accepted)."""
        closed: dict[int, tuple[SegmentState | None, ...]] = {base: (state,) for base, state in states.items()}
        if not manifest.exists:
            # DEBUG: a first start says this once per partition, 50 times over.
            log.debug("%s: recording %d closed segments in a new manifest", self.directory.name, len(closed))
        if not manifest.exists or closed != manifest.closed or manifest.active_base != active_base:
            manifest.closed, manifest.active_base = closed, active_base
            manifest.save()
        self.manifest = manifest

    def check(self) -> CorruptLogError | None:
        """Open's checks of the closed segments against the manifest, read-only (kgc
        inspect runs this on a live or copied data dir): the damage, or None."""
        bases = sorted(b for b in map(parse_segment_name, os.listdir(self.directory)) if b is not None)
        manifest = Manifest(self.directory, self.io).load()
        try:
            _check_present(manifest, self.directory, bases)
            next_offset = 0
            for base in bases[:-1]:
                segment = Segment(self.directory / segment_name(base), base, 0)
                first_offset = next_offset
                next_offset, state = self._scan_closed(segment, next_offset)
                _check_closed(manifest, segment, state, first_offset)
        except CorruptLogError as e:
            return e
        return None

    def accept_loss(self) -> list[str]:
        """Make what is on disk the partition's truth again (kgc repair --accept-loss),
        with kgc stopped: a closed segment that does not scan whole is cut at its first
        bad batch (the cut bytes saved as `.torn-N` evidence), and the manifest is
        recorded anew. Returns what was accepted, for the operator."""
        accepted = []
        damage = self.check()
        if damage is not None:
            accepted.append(f"accepted: {damage}")
        bases = sorted(b for b in map(parse_segment_name, os.listdir(self.directory)) if b is not None)
        next_offset = 0
        for base in bases[:-1]:
            segment = Segment(self.directory / segment_name(base), base, 0)
            with mapped(segment.path) as buf:
                reader = BatchReader(buf, 0, max(next_offset, base)).scan()
                stop, tail = reader.stop, bytes(buf[reader.end:])
            if stop is not None:
                segment.size = reader.end
                self._save_torn_tail(segment, tail, stop)
                accepted.append(f"cut {segment.path} at byte {reader.end} ({len(tail)} bytes saved): {stop}")
            next_offset = max(reader.next_offset, next_offset)
        manifest = Manifest(self.directory, self.io)
        manifest.save()     # empty: the next open records what is on disk
        self.manifest = manifest
        return accepted

    def verify(self) -> CorruptLogError | None:
        """Check every closed segment of a running log against the manifest (the cleaner
        schedule calls this between passes): the damage found, or None."""
        with self.lock:
            closed = list(self.segments[:-1])
            expected = {s.base_offset: self.manifest.state(s.base_offset) for s in closed}
        try:
            _check_present(self.manifest, self.directory,
                           sorted(b for b in map(parse_segment_name, os.listdir(self.directory)) if b is not None))
            for segment in closed:
                state = expected[segment.base_offset]
                if state is None:
                    continue    # being swapped by the cleaner this very moment
                size = os.stat(segment.path).st_size
                if size != state.size or file_checksum(segment.path, size) != state.crc32:
                    first_offset, found = self._scan_closed(Segment(segment.path, segment.base_offset, 0), 0)
                    _check_closed(self.manifest, segment, found, segment.base_offset)
        except CorruptLogError as e:
            return e
        except FileNotFoundError as e:
            return CorruptLogError(str(e.filename), 0, "closed segment missing while running")
        return None

    def _scan_active(self, segment: Segment, min_offset: int) -> int:
        with mapped(segment.path) as buf:
            reader = BatchReader(buf, 0, max(min_offset, segment.base_offset)).scan()
            stop = reader.stop
            segment.size = reader.end
            if stop is None:
                return reader.next_offset
            judgement = judge_tail(buf, stop, reader.next_offset, active=True)
            if judgement.verdict is Tail.END:
                return reader.next_offset
            if judgement.verdict is Tail.DAMAGE:
                raise CorruptLogError(str(segment.path), stop.position, judgement.describe(stop))
            # A torn write into the preallocated tail is followed by its zeros: not evidence.
            tail = bytes(buf[stop.position:judgement.end])
        self._save_torn_tail(segment, tail, stop)
        return reader.next_offset

    def _save_torn_tail(self, segment: Segment, tail: bytes, stop: ScanStop) -> None:
        taken = [name.removeprefix(segment.path.name + TORN_SUFFIX) for name in os.listdir(self.directory)
                 if name.startswith(segment.path.name + TORN_SUFFIX)]
        number = 1 + max((int(n) for n in taken if n.isdigit()), default=0)
        evidence = segment.path.with_name(f"{segment.path.name}{TORN_SUFFIX}{number}")
        self.io.write_file(evidence, tail)
        self.io.fsync_dir(self.directory)
        fd = os.open(segment.path, os.O_WRONLY)
        try:
            self.io.truncate(fd, segment.size)
            self.io.fsync(fd)
        finally:
            os.close(fd)
        log.warning("torn tail in %s: %s; saved %d bytes to %s and truncated to %d bytes",
                    segment.path, stop, len(tail), evidence.name, segment.size)

    # -- write path (writer thread) -----------------------------------------------------

    def write_group(self, batches: list[tuple[int, bytes]]) -> tuple[Segment, int]:
        """Write `(base_offset, data)` batches in order, rolling as needed; return the
        active segment and its size after the write. The caller fsyncs (`fsync`), apart,
        so the two are timed apart."""
        run: list[bytes] = []
        run_bytes = 0
        for base_offset, data in batches:
            if not data:
                continue
            filled = self.segments[-1].size + run_bytes
            if filled > 0 and filled + len(data) > self.segment_bytes:
                self._write_run(run)
                run, run_bytes = [], 0
                self._roll(base_offset)
            run.append(data)
            run_bytes += len(data)
        self._write_run(run)
        active = self.segments[-1]
        return active, active.size

    def fits(self, size: int) -> bool:
        """Whether a batch of `size` bytes goes into the active segment without a roll
        (`write_group`'s rule for a batch written alone)."""
        filled = self.segments[-1].size
        return filled == 0 or filled + size <= self.segment_bytes

    def extends_preallocation(self, size: int) -> bool:
        """Whether `size` more bytes run past the preallocated tail, so that their write
        also writes the next chunk of zeros and their sync is a full fsync of it."""
        return self.preallocate_bytes > 0 and self.segments[-1].size + size > self._allocated

    def _write_run(self, run: list[bytes]) -> None:
        if run:
            data = b"".join(run)
            active = self.segments[-1]
            end = active.size + len(data)
            self.io.write(self._active_fd(), data, active.size)
            active.size = end
            if end > self._allocated:
                self._allocated = end
                self._resized = True
                self._preallocate()

    def _preallocate(self) -> None:
        """Zeros past the log's end, so that the next appends land inside the file (module
        docstring). Best effort: a disk too full for them still takes the log's own bytes,
        and zeros written in part are a zero tail like any other."""
        end = self.segments[-1].size
        target = min(end + self.preallocate_bytes, self.segment_bytes)
        if target <= end:
            return
        fd = self._active_fd()
        try:
            self.io.preallocate(fd, end, target - end)
        except OSError as e:
            log.warning("%s: cannot preallocate %d bytes: %s", self.directory.name, target - end, e)
            self._allocated = os.fstat(fd).st_size
        else:
            self._allocated = target

    def _roll(self, base_offset: int) -> None:
        closed = self.segments[-1]
        fd = self._active_fd()
        if self._allocated > closed.size:
            # A closed segment holds its log and nothing after it (module docstring).
            self.io.truncate(fd, closed.size)
        # The closed segment is fsynced whatever the policy: only the active segment may
        # ever be torn, which is what lets recovery treat damage elsewhere as corruption.
        self.io.fsync(fd)
        os.close(fd)
        self._fd = None
        state = SegmentState(closed.size, base_offset - 1, file_checksum(closed.path, closed.size))
        segment = self._create_segment(base_offset)
        self.manifest.rolled(closed.base_offset, state, base_offset)
        self._fd = self.io.open_segment(segment.path)
        self._allocated = 0
        self._resized = False
        with self.lock:
            self.segments.append(segment)
        log.info("rolled %s to segment %s", self.directory.name, segment.path.name)

    def _create_segment(self, base_offset: int) -> Segment:
        path = self.directory / segment_name(base_offset)
        os.close(self.io.open_segment(path))
        self.io.fsync_dir(self.directory)
        return Segment(path, base_offset, 0)

    def fsync(self) -> None:
        if self._resized:
            self.io.fsync(self._active_fd())
            self._resized = False
        else:
            self.io.fdatasync(self._active_fd())

    def mark_durable(self, segment: Segment, size: int, next_offset: int) -> None:
        with self.lock:
            self.durable_segment = segment
            self.durable_size = size
            self.durable_next_offset = next_offset

    # -- failure ------------------------------------------------------------------------

    def truncate_to_durable(self) -> int:
        """Cut the log back to the last durable mark (after a failed write); return the
        end offset. Bytes past the mark are our own failed write, known and unacknowledged,
        so they are dropped rather than saved: on a full disk, saving them could not work."""
        durable = self._durable()
        self.close()
        with self.lock:
            self.segments = self.segments[:self.segments.index(durable) + 1]
        # Listed from the directory, not from `segments`: a roll may have failed between
        # creating its file and recording it.
        for name in sorted(os.listdir(self.directory)):
            base = parse_segment_name(name)
            if base is not None and base > durable.base_offset:
                log.warning("dropping segment %s created by a failed write", name)
                self.io.unlink(self.directory / name)
        fd = os.open(durable.path, os.O_WRONLY)
        try:
            if os.fstat(fd).st_size != self.durable_size:
                log.warning("truncating %s from %d to %d bytes after a failed write",
                            durable.path, os.fstat(fd).st_size, self.durable_size)
                self.io.truncate(fd, self.durable_size)
            self.io.fsync(fd)
        finally:
            os.close(fd)
        self.io.fsync_dir(self.directory)
        self.manifest.reopened(durable.base_offset)
        durable.size = self.durable_size
        self._fd = self.io.open_segment(durable.path)
        self._allocated = self.durable_size
        self._resized = False
        self.next_offset = self.durable_next_offset
        return self.next_offset

    # -- read path ----------------------------------------------------------------------

    def read(self, from_offset: int = 0) -> Iterator[StoredBatch]:
        """The durable batches with offsets at or past `from_offset`. The files are opened
        now, so a later compaction or roll does not change what this iterator sees."""
        return self._read(from_offset, decode_batch)

    def read_fields(self, from_offset: int = 0) -> Iterator[tuple[bool, list[RecordFields]]]:
        """`read`, each batch as (is transactional, `record_fields`): what a load needs.
        A control batch's records are not walked."""
        return self._read(from_offset, _batch_fields)

    def read_durable(self, from_offset: int, max_bytes: int) -> DurableRead:
        with self.lock:
            log_start = self.segments[0].base_offset if self.segments else 0
            end = self.durable_next_offset
        if from_offset >= end:
            return DurableRead(b"", log_start, end)
        parts: list[bytes] = []
        size = 0
        with contextlib.closing(self._read(from_offset, _batch_bytes)) as batches:
            for batch in batches:
                if parts and size + len(batch) > max_bytes:
                    break
                parts.append(batch)
                size += len(batch)
        return DurableRead(b"".join(parts), log_start, end)

    def _read(self, from_offset: int, decode: Callable[[Any, int, BatchHeader], T]) -> Generator[T, None, None]:
        with self.lock:
            durable = self._durable()
            segments = self.segments[:self.segments.index(durable) + 1]
            chosen = []
            for i, segment in enumerate(segments):
                following = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if following is not None and following <= from_offset:
                    continue
                size = self.durable_size if segment is durable else segment.size
                chosen.append((segment.path, os.open(segment.path, os.O_RDONLY), size))
        return self._read_files(chosen, from_offset, decode)

    @staticmethod
    def _read_files(files: list[tuple[Path, int, int]], from_offset: int,
                    decode: Callable[[Any, int, BatchHeader], T]) -> Generator[T, None, None]:
        try:
            for path, fd, size in files:
                yield from _read_segment(path, fd, size, from_offset, decode)
        finally:
            for _path, fd, _size in files:
                os.close(fd)

    def closed_durable_segments(self) -> list[Segment]:
        """Segments the cleaner may rewrite: closed, and wholly behind the durable mark."""
        with self.lock:
            return self.segments[:self.segments.index(self._durable())]

    def close(self) -> None:
        """Close the active segment; a preallocated tail is cut first, so a stopped
        store's segments hold their logs only (a killed one's keep the zeros)."""
        if self._fd is None:
            return
        try:
            if self._allocated > self.segments[-1].size:
                self.io.truncate(self._fd, self.segments[-1].size)
                self.io.fsync(self._fd)
        except OSError as e:
            log.warning("%s: cannot cut the preallocated tail: %s", self.directory.name, e)
        finally:
            os.close(self._fd)
            self._fd = None
            self._allocated = 0


def _read_segment(path: Path, fd: int, size: int, from_offset: int,
                  decode: Callable[[Any, int, BatchHeader], T]) -> Iterator[T]:
    """`decode(buffer, position, header)` of each batch of a segment's first `size` bytes
    with offsets at or past `from_offset`, read in chunks through `fd` (which may outlive
    a rename of `path`). A batch that does not decode is a `CorruptLogError` naming the
    file and byte."""
    position = 0
    min_offset = 0
    buf = b""
    while position < size:
        want = max(READ_CHUNK_BYTES, len(buf) * 2)
        chunk = os.pread(fd, min(want, size - position - len(buf)), position + len(buf))
        if not chunk:
            raise CorruptLogError(str(path), position + len(buf), "segment shorter than when it was opened")
        buf += chunk
        reader = BatchReader(buf, 0, min_offset)
        try:
            for batch_position, header in reader.headers():
                if header.last_offset >= from_offset:
                    yield decode(buf, batch_position, header)
        except BatchDecodeError as e:
            raise CorruptLogError(str(path), position + e.position, e.detail) from None
        stop = reader.stop
        if stop is not None and not (stop.reason is StopReason.SHORT and position + len(buf) < size):
            raise CorruptLogError(str(path), position + stop.position, str(stop))
        position += reader.end
        min_offset = reader.next_offset
        buf = buf[reader.end:]


def _batch_bytes(buf: Any, position: int, header: BatchHeader) -> bytes:
    return bytes(buf[position:position + header.size])


def _batch_fields(buf: Any, position: int, header: BatchHeader) -> tuple[bool, list[RecordFields]]:
    if header.attributes & CONTROL_FLAG:
        return True, []
    return bool(header.attributes & TRANSACTIONAL_FLAG), record_fields(buf, position, header)


def _check_present(manifest: Manifest, directory: Path, bases: list[int]) -> None:
    """Every closed segment the manifest records, and the active one, is on disk."""
    present = set(bases)
    for base, states in sorted(manifest.closed.items()):
        if base not in present and None not in states:
            last = max(s.last_offset for s in states if s is not None)
            raise CorruptLogError(str(directory / segment_name(base)), 0,
                                  f"closed segment missing: offsets {base}-{last} lost")
    active = manifest.active_base
    if manifest.exists and active is not None and (not bases or max(bases) < active):
        raise CorruptLogError(str(directory / segment_name(active)), 0,
                              f"active segment missing: offsets from {active} lost")


def _check_closed(manifest: Manifest, segment: Segment, found: SegmentState, first_offset: int) -> None:
    """A scanned closed segment is in a state its manifest entry accepts."""
    if not manifest.exists:
        return
    states = manifest.closed.get(segment.base_offset)
    if states is None:
        if segment.base_offset == manifest.active_base:
            return      # a roll stopped before recording it; it was fsynced before the roll
        raise CorruptLogError(str(segment.path), 0, "closed segment not in the manifest")
    if found in states:
        return
    recorded = next((s for s in states if s is not None), None)
    if recorded is None:
        return
    lost_from = max(found.last_offset + 1, first_offset, segment.base_offset)
    if found.size < recorded.size:
        what = "emptied" if found.size == 0 else f"truncated from {recorded.size} to {found.size} bytes"
        raise CorruptLogError(str(segment.path), found.size,
                              f"closed segment {what}: offsets {lost_from}-{recorded.last_offset} lost")
    raise CorruptLogError(str(segment.path), 0,
                          f"closed segment changed since it closed ({found.size} bytes, CRC-32 {found.crc32:08x}; "
                          f"recorded {recorded.size} bytes, CRC-32 {recorded.crc32:08x}): offsets "
                          f"{segment.base_offset}-{recorded.last_offset} in doubt")
