"""`kgc audit --upstream` against a real broker (Tansu): log bounds, lag, impossible offsets."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

# The audit writes Parquet with pyarrow (the spark extra); without it this module skips,
# saying so, before the imports below that need it.
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator import records
from coordinator.offline.cli import main
from coordinator.offline.upstream import UpstreamOffsets
from coordinator.records import GroupMetadataValue, MemberMetadata, OffsetCommitValue
from storage.api import LogRecord
from storage.format import encode_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = "audit-events"
RECREATED = "audit-recreated"
NOW_MS = 1_790_000_000_000


def produce(bootstrap: str, counts: dict[int, int], topic: str = TOPIC) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, len(counts), 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition, count in counts.items():
            for _ in range(count):
                # One record per batch: this Tansu build advances its log end per batch.
                producer.send(topic, b"x", partition=partition).get(timeout=10)
    finally:
        producer.close()


def write_group(data_dir, committed: dict[int, int]) -> None:
    member = MemberMetadata("m-1", None, "c-1", "/127.0.0.1", 60_000, 30_000, b"", b"")
    group = records.new_group_metadata_record(
        "audited", GroupMetadataValue("consumer", 1, "range", "m-1", NOW_MS, (member,)), member_id="m-1")
    commits = [records.new_offset_commit_record("audited", TOPIC, p, OffsetCommitValue(o, -1, "", NOW_MS),
                                                member_id="m-1", generation=1, client_id="c-1")
               for p, o in committed.items()]
    log_records = [LogRecord(records.serialize_key(r.key), records.serialize_value(r.value), r.headers)
                   for r in (group, *commits)]
    directory = data_dir / "__consumer_offsets-3"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(encode_batch(0, log_records, NOW_MS))


def test_log_offsets_lag_and_offsets_past_the_log_end(tansu, tmp_path):
    bootstrap = f"{tansu.host}:{tansu.port}"
    produce(bootstrap, {0: 5, 1: 3})
    assert {tp: v for tp, v in UpstreamOffsets(bootstrap).log_offsets().items() if tp[0] == TOPIC} == \
        {(TOPIC, 0): (0, 5), (TOPIC, 1): (0, 3)}

    write_group(tmp_path / "data", {0: 2, 1: 7})
    report = tmp_path / "report"
    code = main(["audit", str(tmp_path / "data"), "--out", str(report), "--upstream", bootstrap,
                 "--engine", "python", "--now-ms", str(NOW_MS)])
    assert code == 0
    final = {row["partition"]: row for row in pq.read_table(report / "final_offsets.parquet").to_pylist()}
    assert (final[0]["log_start_offset"], final[0]["log_end_offset"], final[0]["lag"]) == (0, 5, 3)
    assert (final[1]["log_end_offset"], final[1]["lag"]) == (3, None)
    findings = pq.read_table(report / "findings.parquet").to_pylist()
    assert [(f["type"], f["partition"], f["committed_offset"], f["previous_offset"], f["member_id"])
            for f in findings] == [("offset_above_log_end", 1, 7, 3, "m-1")]


def test_an_offset_that_recorded_another_id_than_the_topics_now(tansu, tmp_path):
    """`kgc audit --upstream` takes each topic's id from the cluster's Metadata (v10+): a
    commit that recorded another id for the topic's name was made before the topic was
    deleted and created again."""
    import uuid

    bootstrap = f"{tansu.host}:{tansu.port}"
    produce(bootstrap, {0: 5, 1: 3}, RECREATED)
    offsets, topic_ids = UpstreamOffsets(bootstrap).log_offsets_and_topic_ids()
    assert offsets[RECREATED, 0] == (0, 5)
    live = topic_ids[RECREATED]
    assert live.int != 0
    old = uuid.UUID(int=live.int ^ 1)
    commits = [records.new_offset_commit_record("audited", RECREATED, p, OffsetCommitValue(o, -1, "", NOW_MS, -1, i),
                                                member_id="m-1", generation=1, client_id="c-1")
               for p, o, i in ((0, 2, old), (1, 1, live))]
    directory = tmp_path / "data" / "__consumer_offsets-3"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(encode_batch(0, [
        LogRecord(records.serialize_key(r.key), records.serialize_value(r.value), r.headers) for r in commits], NOW_MS))
    report = tmp_path / "report"
    assert main(["audit", str(tmp_path / "data"), "--out", str(report), "--upstream", bootstrap,
                 "--engine", "python", "--now-ms", str(NOW_MS)]) == 0
    findings = pq.read_table(report / "findings.parquet").to_pylist()
    assert [(f["type"], f["partition"], f["committed_offset"]) for f in findings
            if f["type"] != "orphaned_offset"] == [("offset_of_recreated_topic", 0, 2)]
    final = {row["partition"]: row for row in pq.read_table(report / "final_offsets.parquet").to_pylist()}
    assert (final[0]["topic_id"], final[0]["lag"]) == (str(old), None)
    assert (final[1]["topic_id"], final[1]["lag"]) == (str(live), 2)
