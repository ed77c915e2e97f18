"""The pure compaction rules: latest per key, tombstone retention, batches kept whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from storage.api import StoredBatch, StoredRecord
from storage.compaction import compact_batch, latest_offsets

DAY_MS = 86_400_000


def compact(batches, now_ms: int, delete_retention_ms: int):
    """A whole section compacted in one go, as the cleaner and `kgc compact` do it: the map
    of latest offsets first, then each batch against it."""
    batches = list(batches)
    latest = latest_offsets(batches)
    kept = (compact_batch(b, latest, now_ms, delete_retention_ms) for b in batches)
    return [b for b in kept if b is not None]


def batch(base: int, *records: tuple[bytes | None, bytes | None], ts: int = 0, attributes: int = 0) -> StoredBatch:
    return StoredBatch(base, base + len(records) - 1,
                       tuple(StoredRecord(base + i, ts, k, v) for i, (k, v) in enumerate(records)),
                       max_timestamp_ms=ts, attributes=attributes)


def replay(batches) -> dict[bytes, bytes]:
    """What a loader ends with: the last value per key, tombstones delete."""
    state: dict[bytes, bytes] = {}
    for b in batches:
        for r in b.records:
            if r.value is None:
                state.pop(r.key, None)
            else:
                state[r.key] = r.value
    return state


def test_only_the_latest_record_per_key_survives_and_offsets_stay():
    log = [batch(0, (b"a", b"1"), (b"b", b"1")), batch(2, (b"a", b"2")), batch(3, (b"c", b"1"), (b"b", b"2"))]
    out = compact(log, now_ms=0, delete_retention_ms=DAY_MS)
    assert [(b.base_offset, b.last_offset, [r.offset for r in b.records]) for b in out] == [
        (2, 2, [2]), (3, 4, [3, 4])]
    assert out[1] is log[2]                     # untouched batches are the same object


def test_a_batch_keeps_its_first_and_last_offset_when_its_ends_are_removed():
    log = [batch(0, (b"a", b"1"), (b"b", b"1"), (b"c", b"1")), batch(3, (b"a", b"2"), (b"c", b"2"))]
    [first, _] = compact(log, now_ms=0, delete_retention_ms=DAY_MS)
    assert (first.base_offset, first.last_offset, [r.offset for r in first.records]) == (0, 2, [1])


def test_tombstones_live_for_the_retention_after_their_timestamp_then_go():
    log = [batch(0, (b"a", b"1"), ts=0), batch(1, (b"a", None), ts=1_000)]
    kept = compact(log, now_ms=1_000 + DAY_MS - 1, delete_retention_ms=DAY_MS)
    assert [(r.key, r.value) for b in kept for r in b.records] == [(b"a", None)]
    assert compact(log, now_ms=1_000 + DAY_MS, delete_retention_ms=DAY_MS) == []


def test_transactional_and_control_batches_are_kept_and_supersede_nothing():
    txn = batch(1, (b"a", b"txn"), attributes=0x10)
    marker = batch(2, (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"), attributes=0x30)
    log = [batch(0, (b"a", b"1")), txn, marker, batch(3, (b"b", b"1"))]
    assert compact(log, now_ms=0, delete_retention_ms=DAY_MS) == log
    assert latest_offsets(log) == {b"a": 0, b"b": 3}


def test_records_without_a_key_always_survive():
    log = [batch(0, (None, b"1")), batch(1, (None, b"2"))]
    assert compact(log, now_ms=0, delete_retention_ms=DAY_MS) == log


operations = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]),
                                st.none() | st.binary(min_size=1, max_size=3),
                                st.integers(0, 3 * DAY_MS)), min_size=1, max_size=40)


@given(operations, st.integers(1, 5), st.integers(0, 4 * DAY_MS))
def test_compaction_never_changes_the_replayed_state(ops, batch_size, now_ms):
    log, offset = [], 0
    ops.sort(key=lambda op: op[2])        # timestamps grow with offsets, as in a real log
    for start in range(0, len(ops), batch_size):
        chunk = ops[start:start + batch_size]
        log.append(StoredBatch(offset, offset + len(chunk) - 1,
                               tuple(StoredRecord(offset + i, ts, k, v) for i, (k, v, ts) in enumerate(chunk))))
        offset += len(chunk)
    out = compact(log, now_ms, DAY_MS)
    assert replay(out) == replay(log)
    assert compact(out, now_ms, DAY_MS) == out            # a second pass finds nothing more
    survivors = [r for b in out for r in b.records]
    assert len({r.key for r in survivors}) == len(survivors)
    originals = {b.base_offset: b for b in log}
    for b in out:
        original = originals[b.base_offset]
        assert b.last_offset == original.last_offset
        assert set(b.records) <= set(original.records)
    for r in survivors:
        assert r.value is not None or now_ms < r.timestamp_ms + DAY_MS
