"""`kgc import --kafka-log`: a generated Kafka `__consumer_offsets` directory (plain
commits, a deleted group, committed, aborted and overtaken transactions, a simple group, a
KIP-848 record) imported into a kgc data dir gives the state replaying it gives: Kafka's
load rules for the transactions, kgc's own replay (`kgc inspect`) for the rest."""

from __future__ import annotations

import argparse
import contextlib
import io
import struct
from collections import defaultdict
from pathlib import Path

import pytest

from coordinator import records
from coordinator.migrate_command import add_migrate_parsers
from coordinator.offline.inspect import inspect_data_dir
from coordinator.offline.kafka_import import read_kafka_log
from coordinator.partitioning import partition_for
from coordinator.runtime.loader import KafkaRecordSerde
from storage.api import StoredBatch, StoredRecord
from storage.format import CONTROL_FLAG, TRANSACTIONAL_FLAG, encode_stored_batch
from storage.segment import segment_name

T0 = 1_700_000_000_000
SERDE = KafkaRecordSerde()
ABORT, COMMIT = 0, 1


class KafkaLog:
    """Batches appended per `__consumer_offsets` partition, as a Kafka broker lays them out."""

    def __init__(self):
        self.batches: dict[int, list[bytes]] = defaultdict(list)
        self.next_offset: dict[int, int] = defaultdict(int)

    def append(self, partition: int, stored: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
               attributes: int = 0) -> None:
        base = self.next_offset[partition]
        batch = StoredBatch(base, base + len(stored) - 1, tuple(
            StoredRecord(base + i, T0, key, value) for i, (key, value) in enumerate(stored)),
            attributes=attributes, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1)
        self.batches[partition].append(encode_stored_batch(batch))
        self.next_offset[partition] = base + len(stored)

    def records(self, group: str, *recs: records.CoordinatorRecord, producer_id: int = -1) -> None:
        serialized = [SERDE.serialize(r) for r in recs]
        self.append(partition_for(group), [(r.key, r.value) for r in serialized], producer_id=producer_id,
                    attributes=TRANSACTIONAL_FLAG if producer_id >= 0 else 0)

    def marker(self, group: str, producer_id: int, kind: int) -> None:
        self.append(partition_for(group), [(struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0))],
                    producer_id=producer_id, attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG)

    def write(self, directory: Path) -> Path:
        for partition, batches in self.batches.items():
            d = directory / f"__consumer_offsets-{partition}"
            d.mkdir(parents=True)
            (d / segment_name(0)).write_bytes(b"".join(batches))
            (d / "00000000000000000000.index").write_bytes(b"")   # Kafka's other files are ignored
        return directory


def commit(group: str, partition: int, offset: int, topic: str = "t") -> records.CoordinatorRecord:
    return records.new_offset_commit_record(group, topic, partition, records.OffsetCommitValue(offset, -1, "", T0))


def group_metadata(group: str) -> records.CoordinatorRecord:
    return records.new_group_metadata_record(group, records.GroupMetadataValue("consumer", 3, None, None, T0))


def kafka_log(tmp_path: Path) -> Path:
    log = KafkaLog()
    log.records("g-plain", group_metadata("g-plain"), commit("g-plain", 0, 5), commit("g-plain", 1, 7))
    log.records("g-plain", commit("g-plain", 0, 9))
    log.records("g-deleted", group_metadata("g-deleted"), commit("g-deleted", 0, 4))
    log.records("g-deleted", records.new_offset_commit_tombstone("g-deleted", "t", 0),
                records.new_group_metadata_tombstone("g-deleted"))
    log.records("g-simple", commit("g-simple", 2, 11, topic="u"))
    log.records("g-txn", group_metadata("g-txn"), commit("g-txn", 0, 1), commit("g-txn", 1, 1))
    log.records("g-txn", commit("g-txn", 0, 20), producer_id=100)
    log.marker("g-txn", 100, COMMIT)
    log.records("g-txn", commit("g-txn", 1, 30), producer_id=101)
    log.marker("g-txn", 101, ABORT)
    log.records("g-overtaken", commit("g-overtaken", 0, 40), producer_id=102)
    log.records("g-overtaken", commit("g-overtaken", 0, 41))
    log.marker("g-overtaken", 102, COMMIT)
    consumer_group = SERDE.serialize(records.CoordinatorRecord(records.ConsumerGroupMetadataKey("g-848"),
                                                               records.ConsumerGroupMetadataValue(epoch=4)))
    log.append(partition_for("g-848"), [(consumer_group.key, consumer_group.value)])
    log.records("g-848", commit("g-848", 0, 8))
    return log.write(tmp_path / "kafka")


EXPECTED = {
    "g-plain": ("consumer", {("t", 0): 9, ("t", 1): 7}),
    "g-simple": ("", {("u", 2): 11}),
    "g-txn": ("consumer", {("t", 0): 20, ("t", 1): 1}),      # committed transaction in, aborted one out
    "g-overtaken": ("", {("t", 0): 41}),                       # the plain commit after it wins
    "g-848": ("", {("t", 0): 8}),
}


def kgc_import(*args: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    add_migrate_parsers(parser.add_subparsers(dest="command"))
    parsed = parser.parse_args(["import", *args])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = parsed.handler(parsed)
    return code, out.getvalue()


def imported_state(data_dir: Path) -> dict[str, tuple[str, dict[tuple[str, int], int]]]:
    groups = inspect_data_dir(data_dir).groups
    return {g: (s.metadata.protocol_type if isinstance(s.metadata, records.GroupMetadataValue) else "",
                {tp: v.offset for tp, v in s.offsets.items()}) for g, s in groups.items()}


def test_the_log_replays_as_kafka_loads_it(tmp_path):
    state = read_kafka_log(kafka_log(tmp_path))
    assert {g: (s.protocol_type, {tp: v.offset for tp, (_, v) in s.offsets.items()})
            for g, s in state.groups.items()} == EXPECTED
    assert state.transactions == {"committed": 2, "aborted": 1}
    assert state.skipped == {"ConsumerGroupMetadataKey": 1}


def test_import_is_a_dry_run_until_apply_then_equals_replaying_the_log(tmp_path):
    source, data_dir = kafka_log(tmp_path), tmp_path / "kgc"
    code, out = kgc_import("--kafka-log", str(source), "--data-dir", str(data_dir))
    assert code == 0, out
    assert "g-txn: would adopt 'consumer' group with 2 committed offset(s): t-0=20 t-1=1" in out
    assert "skipped 1 ConsumerGroupMetadataKey record(s)" in out
    assert not data_dir.exists()

    code, out = kgc_import("--kafka-log", str(source), "--data-dir", str(data_dir), "--apply")
    assert code == 0, out
    assert imported_state(data_dir) == EXPECTED
    # Where no transaction is involved, kgc's own replay of the Kafka log says the same.
    replayed = imported_state(source)
    for group in ("g-plain", "g-simple"):
        assert replayed[group] == EXPECTED[group]
    assert "g-deleted" not in replayed or not replayed["g-deleted"][1]
    inspected = inspect_data_dir(data_dir).groups
    assert all(origin == ("kafka-log", origin[1]) for g in inspected.values() for origin in g.adopted.values())
    assert {g: len(s.adopted) for g, s in inspected.items()} == {g: len(o) for g, (_, o) in EXPECTED.items()}

    code, out = kgc_import("--kafka-log", str(source), "--data-dir", str(data_dir), "--apply")
    assert code == 0 and "g-plain: kgc already has this group, or adopted it before: left alone" in out
    assert imported_state(data_dir) == EXPECTED


def test_a_damaged_segment_stops_the_import_and_names_it(tmp_path):
    source = kafka_log(tmp_path)
    segment = source / f"__consumer_offsets-{partition_for('g-plain')}" / segment_name(0)
    data = bytearray(segment.read_bytes())
    data[70] ^= 0xFF   # inside the first batch's records: its CRC no longer matches
    segment.write_bytes(bytes(data) + bytes(data[:200]))  # and a sound-looking batch after it
    code, out = kgc_import("--kafka-log", str(source), "--data-dir", str(tmp_path / "kgc"), "--apply")
    assert code == 1 and segment.name in out and "damaged" in out
    assert not (tmp_path / "kgc").exists()


@pytest.mark.parametrize("args", [("--kafka-log", "x")], ids=["no data dir"])
def test_a_kafka_log_import_needs_kgcs_data_dir(args):
    code, out = kgc_import(*args)
    assert code == 2 and "--data-dir" in out
