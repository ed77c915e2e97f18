"""`kgc import --kafka-log`: a generated Kafka `__consumer_offsets` directory (plain
commits, a deleted group, committed, aborted and overtaken transactions, a simple group, a
KIP-848 record) imported into a kgc data dir gives the state replaying it gives: Kafka's
load rules for the transactions, kgc's own replay (`kgc inspect`) for the rest."""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import struct
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from coordinator import records
from coordinator.commands.migrate import add_migrate_parsers
from coordinator.offline.inspect import inspect_data_dir, inspect_partition
from coordinator.offline.job import Options
from coordinator.offline.kafka_import import read_kafka_log
from coordinator.offline.runner import audit
from coordinator.partitioning import partition_for
from storage.api import StoredBatch, StoredRecord
from storage.format import CONTROL_FLAG, TRANSACTIONAL_FLAG, encode_stored_batch
from storage.segment import segment_name
from tests.support.admin import committed_offsets, create_topic, produce_sequenced
from tests.support.clients import CONSUMER_PROTOCOL, Member, MemberSettings, wait_until
from tests.support.data_dirs import partitions_held
from tests.support.kafka import KafkaCluster
from tests.support.log_records import log_record

T0 = 1_700_000_000_000
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
        serialized = [log_record(r) for r in recs]
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
    consumer_group = log_record(records.CoordinatorRecord(records.ConsumerGroupMetadataKey("g-848"),
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


def test_an_import_locks_the_partitions_it_writes_and_refuses_while_another_process_has_one(tmp_path):
    source, data_dir = kafka_log(tmp_path), tmp_path / "kgc"
    data_dir.mkdir()
    written = {partition_for(group) for group in EXPECTED}
    plain = partition_for("g-plain")
    with partitions_held(data_dir, [plain]) as holder:
        code, out = kgc_import("--kafka-log", str(source), "--data-dir", str(data_dir), "--apply")
        assert (code, out.splitlines()[-1]) == (1, f"kgc import: data dir {data_dir}: another kgc process "
                                                   f"(pid {holder.pid}) serves partition {plain}; stop it first: "
                                                   "nothing was adopted")
    assert imported_state(data_dir) == {}
    # Partitions it does not write may be another's meanwhile.
    with partitions_held(data_dir, sorted(set(range(50)) - written)):
        code, out = kgc_import("--kafka-log", str(source), "--data-dir", str(data_dir), "--apply")
    assert code == 0, out
    assert imported_state(data_dir) == EXPECTED


@pytest.mark.parametrize("args", [("--kafka-log", "x")], ids=["no data dir"])
def test_a_kafka_log_import_needs_kgcs_data_dir(args):
    code, out = kgc_import(*args)
    assert code == 2 and "--data-dir" in out


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_real_kafka_brokers_log_reads_as_kafka_answers_imports_and_audits(tmp_path_factory, tmp_path):
    """`__consumer_offsets` written by a real Kafka 4.4 broker (50 partitions, as Kafka's
    default) for groups real clients drove: a classic group, a simple (assign) group, a KIP-848
    group, offsets committed in a transaction and in one aborted, a deleted group. Copied from
    the stopped broker's log directory, the log replays to what Kafka's own OffsetFetch said,
    imports into kgc as that, and the audit names only what it should."""
    kafka = KafkaCluster(tmp_path_factory.mktemp("kafka-log"), settings={"offsets.topic.num.partitions": "50"})
    began_ms = int(time.time() * 1000)
    with kafka:
        truth = drive_groups(kafka.bootstrap)
    ended_ms = int(time.time() * 1000)
    copy = tmp_path / "copied"
    for directory in (kafka.nodes[0].directory / "data").glob("__consumer_offsets-*"):
        shutil.copytree(directory, copy / directory.name)
    assert len(list(copy.iterdir())) == 50

    state = read_kafka_log(copy)
    assert {g: {tp: v.offset for tp, (_, v) in s.offsets.items()} for g, s in state.groups.items()
            if s.offsets} == truth
    assert state.transactions == {"committed": 1, "aborted": 1}
    assert state.skipped["ConsumerGroupMetadataKey"] >= 1     # the KIP-848 group's records
    # Kafka 4.3+ stamps each target assignment with its time (KIP-1263, a tagged field),
    # which kgc reads as its own records' stamp; 0 once its member left and the group was
    # empty, as kgc writes it too ("a new group": its next assignment need not wait).
    stamps = [r.value.assignment_timestamp for b in _records(copy, "real-848") for r in b.records
              if isinstance(r.key, records.ConsumerGroupTargetAssignmentMetadataKey) and r.value is not None]
    assert len(stamps) == 2 and began_ms <= stamps[0] <= ended_ms and stamps[1] == 0, (stamps, began_ms, ended_ms)

    data_dir = tmp_path / "kgc"
    code, out = kgc_import("--kafka-log", str(copy), "--data-dir", str(data_dir), "--apply")
    assert code == 0, out
    assert {g: offsets for g, (_, offsets) in imported_state(data_dir).items() if offsets} == truth

    run = audit(copy, tmp_path / "report", Options(now_ms=int(time.time() * 1000)), upstream="test")
    found = sorted((f.type.name, f.group) for r in run.results for f in r.findings)
    # Offsets without a group (assign() and a transactional producer's) are what the audit
    # calls orphaned; the deleted group left tombstones, the others are whole.
    assert found == sorted([("ORPHANED_OFFSET", "real-simple"), ("ORPHANED_OFFSET", "real-simple"),
                            ("ORPHANED_OFFSET", "real-txn")])


def _records(kafka_dir: Path, group: str):
    """The batches of `group`'s `__consumer_offsets` partition, decoded as kgc decodes its own."""
    partition = partition_for(group)
    return [batch for segment in inspect_partition(kafka_dir / f"__consumer_offsets-{partition}", partition).segments
            for batch in segment.batches]


def drive_groups(bootstrap: str) -> dict[str, dict[tuple[str, int], int]]:
    """Real clients against Kafka's own coordinator; returns what Kafka's OffsetFetch says
    each surviving group has committed."""


    topic = create_topic(bootstrap, 2, name="real-topic")
    produce_sequenced(bootstrap, topic, 2, 10)
    for group, library in (("real-plain", "java"), ("real-848", CONSUMER_PROTOCOL), ("real-deleted", "confluent-kafka")):
        member = Member(library, MemberSettings(bootstrap, group, topic, group)).start()
        try:
            wait_until(lambda m=member: len(m.consumed) == 20, 60, lambda m=member: f"{len(m.consumed)}", [member])
            member.commit()
        finally:
            member.close()
    simple = KafkaConsumer(bootstrap_servers=bootstrap, group_id="real-simple", enable_auto_commit=False)
    try:
        simple.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        simple.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1),
                       TopicPartition(topic, 1): OffsetAndMetadata(4, "", -1)})
    finally:
        simple.close()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "real-txn-producer"})
    producer.init_transactions(30)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "real-txn"})
    try:
        for offset, commit in ((7, True), (9, False)):
            producer.begin_transaction()
            producer.produce(topic, b"txn", partition=0)
            producer.send_offsets_to_transaction([ConfluentPartition(topic, 0, offset)],
                                                 reader.consumer_group_metadata(), 30)
            producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    finally:
        reader.close()
        producer.flush(10)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_groups(["real-deleted"])
    finally:
        admin.close()
    return {group: {(topic, p): o for p, o in committed_offsets(bootstrap, group).items()}
            for group in ("real-plain", "real-848", "real-simple", "real-txn")}
