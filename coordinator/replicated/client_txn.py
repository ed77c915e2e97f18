"""Clients' transactions in the state topic, written as kgc's own records.

In the local store a client's transactional offsets are a batch of the client's producer,
and the transaction's end is Kafka's control marker, as in Kafka's `__consumer_offsets`.
The replicated store can write neither: every record of the state topic goes into the
partition's own transaction (the one that fences an old owner), a batch has one producer,
and a client may not produce control batches. Nor can the state partition itself take part
in the client's transaction: the upstream would write the marker at an offset the store
cannot know when it numbers its appends (it numbers them before they are written).

So the store writes a client's transaction as records of its own, which `loaded` turns
back into what the local store holds, offset for offset:
- each pending offset: key (CLIENT_TXN_OFFSET type, producer id, epoch, the offset's own
  key), the offset's value and headers;
- the end: key (CLIENT_TXN_MARKER type, producer id), value (0, epoch, COMMIT or ABORT),
  followed in the same transaction by, on COMMIT, a plain copy of each offset the
  transaction makes committed (not those a later plain commit or tombstone of the same
  key replaced: Kafka's log order rule, txn_offsets.py), then a tombstone of each pending
  record and of the end.
Kafka's cleaner does not know these are a transaction: the copies keep the committed
offsets once it has dropped the pending records, and the tombstones are what lets it
drop them. The runtime numbers only the end (one record, as Kafka's marker); the store
leaves the copies' and tombstones' offsets out of its numbering, and `loaded` reads the
copies back as the plain commits they are, and skips the tombstones.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from coordinator.records.types import CLIENT_TXN_MARKER_KEY_TYPE, CLIENT_TXN_OFFSET_KEY_TYPE
from storage.api import CONTROL_ABORT, CONTROL_COMMIT, LogRecord, StoredBatch, StoredRecord, TxnBatch
from storage.format import CONTROL_FLAG, TRANSACTIONAL_FLAG, control_record

_OFFSET_HEAD = struct.Struct(">hqh")     # type, producer id, epoch; then the offset's key
OFFSET_HEAD_SIZE = _OFFSET_HEAD.size
_MARKER_KEY = struct.Struct(">hq")       # type, producer id
_MARKER_VALUE = struct.Struct(">hhh")    # version 0, epoch, control type
_CONTROL_TYPES = (CONTROL_ABORT, CONTROL_COMMIT)


def offset_key(producer_id: int, producer_epoch: int, key: bytes) -> bytes:
    return _OFFSET_HEAD.pack(CLIENT_TXN_OFFSET_KEY_TYPE, producer_id, producer_epoch) + key


def marker_key(producer_id: int) -> bytes:
    return _MARKER_KEY.pack(CLIENT_TXN_MARKER_KEY_TYPE, producer_id)


@dataclass(slots=True)
class _Open:
    """One producer's transaction, as far as this partition has seen it."""
    epoch: int
    written: set[bytes] = field(default_factory=set)             # its pending records' keys
    commits: dict[bytes, LogRecord] = field(default_factory=dict)  # offset key → what COMMIT makes committed


class ClientTransactions:
    """The open client transactions of one state partition: what their end must write."""

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}
        self._producers_of: dict[bytes, set[int]] = {}      # offset key → producers with it pending

    def stage(self, records: Sequence[LogRecord], txn: TxnBatch) -> list[LogRecord]:
        """A client's pending offsets: the records to write for them."""
        pid, epoch = txn.producer_id, txn.producer_epoch
        this = self._open.setdefault(pid, _Open(epoch))
        out = []
        for record in records:
            key = offset_key(pid, epoch, record.key)
            this.written.add(key)
            this.commits[record.key] = record
            self._producers_of.setdefault(record.key, set()).add(pid)
            out.append(LogRecord(key, record.value, record.headers))
        return out

    def supersede(self, records: Iterable[LogRecord]) -> None:
        """Plain records: a commit or tombstone of an offset key replaces what any open
        transaction holds pending for it, whichever way that transaction ends."""
        if not self._producers_of:
            return
        for record in records:
            for pid in self._producers_of.pop(record.key, ()):
                self._open[pid].commits.pop(record.key, None)

    def end(self, txn: TxnBatch) -> list[LogRecord]:
        """The transaction's end: its marker, the copies COMMIT makes, the tombstones."""
        pid = txn.producer_id
        this = self._forget(pid) or _Open(txn.producer_epoch)
        out = [LogRecord(marker_key(pid), _MARKER_VALUE.pack(0, txn.producer_epoch, txn.control))]
        if txn.control == CONTROL_COMMIT:
            out += this.commits.values()
        out += [LogRecord(key, None) for key in sorted(this.written)]
        out.append(LogRecord(marker_key(pid), None))
        return out

    def _forget(self, pid: int) -> _Open | None:
        this = self._open.pop(pid, None)
        for key in this.commits if this is not None else ():
            producers = self._producers_of[key]
            producers.discard(pid)
            if not producers:
                del self._producers_of[key]
        return this

    def replay(self, batch: StoredBatch) -> None:
        """A batch as `loaded` gives it, in log order: what is open after it."""
        if batch.is_control:
            self._forget(batch.producer_id)
        elif batch.is_transactional:
            self.stage([LogRecord(r.key or b"", r.value, r.headers) for r in batch.records],
                       TxnBatch(batch.producer_id, batch.producer_epoch))
        else:
            self.supersede(LogRecord(r.key or b"", r.value) for r in batch.records)


def loaded(batch: StoredBatch) -> list[StoredBatch]:
    """One batch the store read from the topic, as the local store would hold it: its
    pending offsets a transactional batch of their producer, its ends control batches, the
    rest plain; tombstones of pending records and of ends left out."""
    out: list[StoredBatch] = []
    run: list[StoredRecord] = []
    run_kind: tuple[int, int] | None = None     # (producer id, epoch) of a pending run; None: plain

    def flush() -> None:
        if run:
            if run_kind is None:
                out.append(StoredBatch(run[0].offset, run[-1].offset, tuple(run), batch.max_timestamp_ms,
                                       batch.attributes, batch.producer_id, batch.producer_epoch))
            else:
                out.append(StoredBatch(run[0].offset, run[-1].offset, tuple(run), batch.max_timestamp_ms,
                                       TRANSACTIONAL_FLAG, run_kind[0], run_kind[1]))
            run.clear()

    for record in batch.records:
        key = record.key or b""
        record_type = struct.unpack_from(">h", key)[0] if len(key) >= 2 else None
        if record_type == CLIENT_TXN_OFFSET_KEY_TYPE and len(key) >= _OFFSET_HEAD.size:
            if record.value is None:
                flush()
                continue
            _, pid, epoch = _OFFSET_HEAD.unpack_from(key)
            if run_kind != (pid, epoch):
                flush()
                run_kind = (pid, epoch)
            run.append(record._replace(key=key[_OFFSET_HEAD.size:]))
        elif record_type == CLIENT_TXN_MARKER_KEY_TYPE and len(key) == _MARKER_KEY.size:
            flush()
            if record.value is None:
                continue
            _, pid = _MARKER_KEY.unpack(key)
            _, epoch, control = _MARKER_VALUE.unpack(record.value)
            if control not in _CONTROL_TYPES:
                raise ValueError(f"offset {record.offset}: a client transaction's end of unknown type {control}")
            marker = control_record(control)
            out.append(StoredBatch(record.offset, record.offset, (StoredRecord(
                record.offset, record.timestamp_ms, marker.key, marker.value),), batch.max_timestamp_ms,
                TRANSACTIONAL_FLAG | CONTROL_FLAG, pid, epoch))
        else:
            if run_kind is not None:
                flush()
                run_kind = None
            run.append(record)
    flush()
    return out
