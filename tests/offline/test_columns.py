"""The columnar scanner reads exactly what the record-by-record scan (storage.format) reads:
every record of every sound batch, the same damage findings, on generated data dirs and
on batches built to hit each rule (compressed, control, log-append time, long varints,
records and headers that do not frame under a good CRC, header names that are not UTF-8)."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import filecmp
import gzip
import os
import struct
from dataclasses import replace

import pytest

# The columnar scanner is numpy and pyarrow (the spark extra); without them this module
# skips, saying so, before the imports below that need them.
pytest.importorskip("numpy", reason="numpy is not installed (pip install -e '.[spark]')")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from coordinator.offline.columns import scan_columns
from coordinator.offline.findings import Finding
from coordinator.offline.generate import generate
from coordinator.offline.job import Options
from coordinator.offline.runner import audit, compact
from coordinator.offline.scan import PartitionScan
from coordinator.offline.tables import read_history
from storage.api import LogRecord, StoredBatch, StoredRecord
from storage.file_store import partition_dirs
from storage.format import (
    ATTRIBUTES_POS,
    BATCH_HEADER_LEN,
    CONTROL_FLAG,
    CRC_POS,
    TRANSACTIONAL_FLAG,
    Compression,
    encode_batch,
    encode_stored_batch,
)
from tests.support.audit_logs import (
    CLEAN,
    DIRTY,
    KAFKA_WRITTEN,
    RECREATED_FINDINGS,
    RECREATED_LOG_OFFSETS,
    RECREATED_TOPIC_IDS,
    consumer_group_record,
    offset_commit_record,
    recreated_topic_log,
)


def reference(partition: int, directory) -> tuple[list, list, tuple]:
    scan = PartitionScan(partition, directory)
    records = [((s.segment, s.position), r.offset, r.timestamp_ms, r.key, r.value, r.headers)
               for s in scan for r in s.batch.records]
    return records, sorted(map(repr, scan.problems + scan.evidence)), (scan.next_offset, scan.tail_bytes,
                                                                         scan.bytes_read)


def columnar(partition: int, directory) -> tuple[list, list, tuple]:
    cols = scan_columns(partition, directory)
    buf = cols.buf.tobytes()
    spans = cols.records

    def piece(pos, length):
        return None if length < 0 else buf[pos:pos + length]

    records = [(cols.segment_position(int(spans.batch[i])), int(cols.offset[i]), int(cols.timestamp[i]),
                piece(spans.key_pos[i], spans.key_len[i]), piece(spans.value_pos[i], spans.value_len[i]),
                cols.header_blocks[spans.header_block[i]]) for i in range(len(spans.batch))]
    scan = cols.scan
    return records, sorted(map(repr, scan.problems + scan.evidence)), (scan.next_offset, scan.tail_bytes,
                                                                         scan.bytes_read)


def assert_same(data_dir) -> int:
    compared = 0
    for partition, directory in partition_dirs(data_dir).items():
        expected = reference(partition, directory)
        assert columnar(partition, directory) == expected
        compared += len(expected[0])
    return compared


def test_generated_data_dirs_read_the_same(dirty, clean):
    assert assert_same(dirty[0]) > 5_000
    assert assert_same(clean[0]) > 5_000


def restamp(buf: bytearray) -> bytes:
    (length,) = struct.unpack_from(">i", buf, 8)
    struct.pack_into(">I", buf, CRC_POS, crc32c(bytes(buf[ATTRIBUTES_POS:12 + length])))
    return bytes(buf)


def kafka_python_gzip(base_offset: int, records: list[StoredRecord]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=Compression.GZIP, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, r in enumerate(records):
        builder.append(i, timestamp=1_000 + i, key=r.key, value=r.value, headers=list(r.headers))
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


names = st.sampled_from(["member_id", "generation", "client_id", "x", "a-much-longer-header-name"])
blobs = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=60, max_size=200))
# Null keys too: only damage leaves a keyless record in __consumer_offsets, but the format
# allows one, so the batches hold stored records (as a reader finds them) and go on disk.
record = st.builds(StoredRecord, st.just(0), st.just(1_000), st.one_of(st.none(), st.binary(max_size=30)), blobs,
                   st.lists(st.tuples(names, blobs), max_size=3).map(tuple))
# How a batch is written: plain, gzip, control, log-append time, or plain with one
# byte of its records changed under a good CRC.
shape = st.one_of(st.sampled_from(["plain", "gzip", "control", "append-time"]),
                  st.tuples(st.just("mangled"), st.integers(0, 10_000), st.integers(1, 255)))


def build(base: int, records: list[StoredRecord], how) -> bytes:
    if how == "gzip":
        return kafka_python_gzip(base, records)
    if how == "control":
        stored = tuple(r._replace(offset=base + i, timestamp_ms=7) for i, r in enumerate(records))
        return encode_stored_batch(StoredBatch(base, base + len(records) - 1, stored, max_timestamp_ms=7,
                                               attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG, producer_id=9))
    stored = tuple(r._replace(offset=base + i) for i, r in enumerate(records))
    buf = bytearray(encode_stored_batch(StoredBatch(base, base + len(records) - 1, stored)))
    if how == "append-time":
        struct.pack_into(">h", buf, ATTRIBUTES_POS, 0x08)
        struct.pack_into(">q", buf, 35, 55_555)
    else:
        struct.pack_into(">q", buf, 27, 1_000 - 300)        # records 300 ms after the base: 2-byte deltas
        if how != "plain":
            _, at, xor = how
            at = BATCH_HEADER_LEN + at % (len(buf) - BATCH_HEADER_LEN)
            buf[at] ^= xor
    return restamp(buf)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(record, min_size=1, max_size=70), shape), min_size=1, max_size=6))
def test_any_batches_read_the_same(tmp_path_factory, batches):
    directory = tmp_path_factory.mktemp("cols") / "__consumer_offsets-3"
    directory.mkdir()
    data = bytearray()
    base = 0
    for records, how in batches:
        data += build(base, records, how)
        base += len(records)
    (directory / "00000000000000000000.log").write_bytes(bytes(data))
    (directory / f"{base:020d}.log").write_bytes(data[-40:])      # an active segment with a write in progress
    assert columnar(3, directory) == reference(3, directory)


def test_records_longer_than_two_varint_bytes_and_bad_header_names(tmp_path):
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    big = [LogRecord(b"k" * 20_000, b"v" * 70_000, (("member_id", b"m" * 300),))] * 3
    bad_name = bytearray(encode_batch(3, [LogRecord(b"k", b"v", (("n\xe9", b"v"),))], 5))
    at = bytes(bad_name).index(b"n\xc3\xa9")
    bad_name[at:at + 3] = b"n\xff\xfe"                        # the same length, not UTF-8
    compressed = bytearray(encode_batch(4, [LogRecord(b"k", b"v")], 6))
    payload = gzip.compress(bytes(compressed[BATCH_HEADER_LEN:]))
    compressed = compressed[:BATCH_HEADER_LEN] + payload
    struct.pack_into(">i", compressed, 8, len(compressed) - 12)
    struct.pack_into(">h", compressed, ATTRIBUTES_POS, Compression.GZIP)
    (directory / "00000000000000000000.log").write_bytes(
        encode_batch(0, big, 1) + restamp(bad_name) + restamp(compressed))
    records, problems, _ = reference(0, directory)
    assert len(records) == 4 and len(problems) == 1 and "undecodable" in problems[0]
    assert columnar(0, directory) == reference(0, directory)


def test_a_header_walk_that_fails_beside_a_name_that_is_not_utf8(tmp_path):
    """Found by the property test above: a header whose name length is negative (its walk
    fails, its name is null) in the same partition as a name that is not UTF-8."""
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    not_utf8 = bytearray(encode_batch(0, [LogRecord(b"k", b"v", (("n\xe9", b"v"),))], 5))
    at = bytes(not_utf8).index(b"n\xc3\xa9")
    not_utf8[at:at + 3] = b"n\xff\xfe"
    negative = bytearray(encode_batch(1, [LogRecord(b"k", b"v", (("zz", b"v"),))], 5))
    at = bytes(negative).index(b"zz")
    negative[at - 1] = 0x01                                   # zigzag -1: a null header name
    (directory / "00000000000000000000.log").write_bytes(restamp(not_utf8) + restamp(negative))
    assert columnar(0, directory) == reference(0, directory)


def both_scanners(run, data_dir, tmp_path, options: Options, **kwargs):
    columns = run(data_dir, tmp_path / "columns", replace(options, scanner="columns"), **kwargs)
    reference = run(data_dir, tmp_path / "records", replace(options, scanner="records"), **kwargs)
    return columns, reference


@pytest.mark.parametrize("config", [DIRTY, KAFKA_WRITTEN], ids=["kgc", "kafka-written"])
def test_the_audit_finds_the_same_as_the_record_by_record_audit(config, tmp_path):
    data_dir = tmp_path / "data"
    manifest = generate(data_dir, config)
    columns, reference = both_scanners(audit, data_dir, tmp_path, Options(now_ms=config.now_ms),
                                       log_offsets=manifest.log_offsets, upstream="test")
    key = Finding.identity
    for new, old in zip(columns.results, reference.results, strict=True):
        assert sorted(new.findings, key=lambda f: (repr(key(f)), f.detail)) == \
            sorted(old.findings, key=lambda f: (repr(key(f)), f.detail))
        assert sorted(map(repr, new.final_offsets)) == sorted(map(repr, old.final_offsets))
        assert new.groups == old.groups
        assert (new.records, new.skipped_records, new.commits) == (old.records, old.skipped_records, old.commits)
    assert columns.summary == {**reference.summary, "data_dir": columns.summary["data_dir"]}
    for table in ("findings", "final_offsets", "groups"):
        assert pq.read_table(tmp_path / "columns" / f"{table}.parquet").equals(
            pq.read_table(tmp_path / "records" / f"{table}.parquet"))
    assert read_history(tmp_path / "columns").equals(read_history(tmp_path / "records"))


@pytest.mark.parametrize("config", [CLEAN, replace(KAFKA_WRITTEN, integrity=False, seed=5)],
                         ids=["kgc", "kafka-written"])
def test_compaction_writes_the_same_bytes_as_the_record_by_record_compaction(config, tmp_path):
    data_dir = tmp_path / "data"
    generate(data_dir, config)
    # Some tombstones expired, some not; small segments so output rolls.
    options = Options(now_ms=config.now_ms, delete_retention_ms=3_600_000, segment_bytes=4096)
    columns, reference = both_scanners(compact, data_dir, tmp_path, options)
    assert columns.totals == reference.totals
    assert columns.totals["records_after"] < columns.totals["records_before"]
    for d in partition_dirs(tmp_path / "records").values():
        names = sorted(os.listdir(d))
        assert sorted(os.listdir(tmp_path / "columns" / d.name)) == names
        _match, mismatch, errors = filecmp.cmpfiles(d, tmp_path / "columns" / d.name, names, shallow=False)
        assert mismatch == errors == []


def test_kafka_4_group_records_are_judged_the_same(tmp_path):
    """KIP-848 records (decoded, one of them damaged), a share group's (not decoded) and
    commits around them, audited by both scanners."""
    from coordinator import records

    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)

    commit, consumer_group = offset_commit_record, consumer_group_record

    epoch = records.serialize_value(records.ConsumerGroupMetadataValue(1))
    log = [consumer_group("new", epoch), commit("new"), consumer_group("gone", epoch), commit("gone"),
           consumer_group("gone", None), LogRecord(b"\x00\x0b\x00\x05share", b"\x00\x00anything"), commit("share"),
           consumer_group("broken", epoch[:3]), commit("broken")]
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, log, 1))
    columns, reference = both_scanners(audit, tmp_path / "data", tmp_path, Options(now_ms=2))
    assert sorted(map(repr, columns.results[0].findings)) == sorted(map(repr, reference.results[0].findings))
    assert {f.type.value for f in columns.results[0].findings} == {"offset_of_deleted_group", "undecodable_record",
                                                                    "orphaned_offset"}
    assert columns.summary == reference.summary


def test_offsets_of_a_recreated_topic_are_judged_the_same(tmp_path, monkeypatch):
    """Commits that recorded a topic id (OffsetCommitValue v4), some of them the id of a
    topic since recreated, and v4 values as Kafka 4.1+ writes them without one: the same
    findings, final offsets (with the id) and tables from both scanners; the columns read
    v4 values without metadata as columns, not one by one."""
    from coordinator import records

    decoded_one_by_one: list[int] = []
    deserialize_value = records.deserialize_value

    def counted(key, value: bytes):
        decoded_one_by_one.append(len(value))
        return deserialize_value(key, value)

    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, recreated_topic_log(), 1))
    monkeypatch.setattr(records, "deserialize_value", counted)
    columns = audit(tmp_path / "data", tmp_path / "columns", Options(now_ms=2, scanner="columns"),
                    log_offsets=RECREATED_LOG_OFFSETS, upstream="test", topic_ids=RECREATED_TOPIC_IDS)
    assert decoded_one_by_one == [43]           # the one value with metadata (and an id)
    monkeypatch.undo()
    reference = audit(tmp_path / "data", tmp_path / "records", Options(now_ms=2, scanner="records"),
                      log_offsets=RECREATED_LOG_OFFSETS, upstream="test", topic_ids=RECREATED_TOPIC_IDS)
    new, old = columns.results[0], reference.results[0]
    assert sorted(map(repr, new.findings)) == sorted(map(repr, old.findings))
    assert {(f.type.value, f.group, f.topic, f.partition, f.committed_offset) for f in new.findings} == \
        RECREATED_FINDINGS
    assert sorted(map(repr, new.final_offsets)) == sorted(map(repr, old.final_offsets))
    ids = {r["group"]: r["topic_id"] for r in new.final_offsets}
    assert (ids["old"], ids["kafka-by-id"], ids["kafka-by-name"], ids["kafka-zero-id"]) == (
        "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b", None, None)
    assert columns.summary == {**reference.summary, "data_dir": columns.summary["data_dir"]}
    for table in ("findings", "final_offsets", "groups"):
        assert pq.read_table(tmp_path / "columns" / f"{table}.parquet").equals(
            pq.read_table(tmp_path / "records" / f"{table}.parquet"))
    assert read_history(tmp_path / "columns").equals(read_history(tmp_path / "records"))


def test_member_epochs_are_judged_the_same(tmp_path):
    """KIP-848 commits by member epoch: per (group, member), as of each commit; a member
    gone (tombstone) or in another group is not the one judged; an older epoch passes
    from the one the member was given its partitions at (KIP-1251), or, in a record
    without assignment epochs, from its previous epoch."""
    import uuid

    from coordinator import records

    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)

    def log_record(record) -> LogRecord:
        return LogRecord(records.serialize_key(record.key), records.serialize_value(record.value), record.headers)

    def epoch(group: str, member: str, current: int | None, previous: int = 0,
              given_at: int | None = None) -> LogRecord:
        held = ((uuid.UUID(int=7), (0,), None if given_at is None else (given_at,)),)
        value = None if current is None else records.ConsumerGroupCurrentMemberAssignmentValue(
            current, previous, 0, held, ())
        return log_record(records.CoordinatorRecord(records.ConsumerGroupCurrentMemberAssignmentKey(group, member),
                                                    value))

    def commit(group: str, member: str, member_epoch: int, offset: int) -> LogRecord:
        return log_record(records.new_offset_commit_record(group, "t", 0, records.OffsetCommitValue(offset, -1, "", 1),
                                                           member_id=member, generation=member_epoch))

    group_epoch = records.serialize_value(records.ConsumerGroupMetadataValue(5))
    log = [consumer_group_record("g", group_epoch), consumer_group_record("h", group_epoch),
           commit("g", "a", 3, 1),                  # before a has any epoch: not judged
           epoch("g", "a", 5, 4, given_at=4), epoch("h", "a", 2, 1),
           commit("g", "a", 5, 2), commit("g", "a", 4, 3),     # current, given at 4: fine
           commit("g", "a", 3, 4),                  # older than it was given its partition at: stale
           commit("h", "a", 2, 5), commit("h", "a", 1, 6),     # h's a is at 2: fine, then previous
           commit("h", "a", 0, 7),                  # stale in h
           epoch("g", "a", None),                   # a leaves g
           commit("g", "a", 1, 8)]                  # no member to judge against
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, log, 1))
    columns, reference = both_scanners(audit, tmp_path / "data", tmp_path, Options(now_ms=2))
    assert sorted(map(repr, columns.results[0].findings)) == sorted(map(repr, reference.results[0].findings))
    stale = [(f.group, f.record_offset, f.detail) for f in reference.results[0].findings
             if f.type.value == "stale_generation_commit"]
    assert stale == [("g", 7, "member epoch 3, member at 5 since offset 3"),
                     ("h", 10, "member epoch 0, member at 2 since offset 4")]


def test_kgc_adopted_group_records_are_bookkeeping_to_both_audits(tmp_path):
    """kgc's AdoptedGroup record (kept after its group is deleted) is neither a group nor a
    finding to either scanner: counted as skipped, as Kafka's loader skips it."""
    from coordinator import records
    from coordinator.group.adopt import AdoptedOffset, adoption_records

    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    adopted = adoption_records("moved", "consumer", (AdoptedOffset("t", 0, 5, -1, ""),), source="upstream", now_ms=1)
    deleted = [records.new_offset_commit_tombstone("moved", "t", 0), records.new_group_metadata_tombstone("moved")]
    log = [LogRecord(records.serialize_key(r.key), records.serialize_value(r.value), r.headers)
           for r in (*adopted, *deleted)]
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, log, 1))
    columns, reference = both_scanners(audit, tmp_path / "data", tmp_path, Options(now_ms=2))
    for result in (columns.results[0], reference.results[0]):
        assert result.findings == [] and result.skipped_records == 1
    assert columns.summary == reference.summary


def test_segments_read_into_one_buffer_as_far_as_it_goes(tmp_path):
    # The columnar scan sizes its buffer first; an active segment that grows after that
    # is read as it was (its new bytes are the next audit's).
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(b"a" * 10)
    (directory / "00000000000000000007.log").write_bytes(b"b" * 6)
    scan = PartitionScan(0, directory)
    assert scan.segments_size() == 16
    whole = bytearray(13)
    read = [(name, bytes(data), active) for name, data, active in scan.segments(memoryview(whole))]
    assert read == [("00000000000000000000.log", b"a" * 10, False), ("00000000000000000007.log", b"bbb", True)]
    assert bytes(whole) == b"a" * 10 + b"bbb" and scan.bytes_read == 13 and scan.next_offset == 7
