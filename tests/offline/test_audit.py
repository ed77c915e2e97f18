"""The audit against generated data dirs whose anomalies are known (plain-Python engine)."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import json

import pytest

# The audit writes Parquet with pyarrow (the spark extra); without it this module skips,
# saying so, before the imports below that need it.
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator.offline.findings import UPSTREAM_TYPES, Finding, FindingType
from coordinator.offline.generate import expected_identities, generate
from coordinator.offline.job import Options
from coordinator.offline.runner import audit
from coordinator.offline.scan import segment_files
from coordinator.offline.tables import commit_times, read_history
from storage.api import CONTROL_COMMIT, TxnBatch
from storage.format import encode_batch
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


def identities(run) -> set[tuple]:
    return expected_identities(f for r in run.results for f in r.findings)


@pytest.fixture(scope="module")
def dirty_audit(dirty, tmp_path_factory):
    directory, manifest = dirty
    report = tmp_path_factory.mktemp("dirty-report")
    return audit(directory, report, Options(now_ms=DIRTY.now_ms)), report, manifest


def test_finds_every_injected_anomaly_and_nothing_else(dirty_audit):
    run, _report, manifest = dirty_audit
    expected = expected_identities(manifest.expected_without_upstream())
    found = identities(run)
    assert found - expected == set(), "reported what was not injected"
    assert expected - found == set(), "missed injected anomalies"
    kinds = {identity[0] for identity in expected}
    # Open transactions have a test of their own (below).
    assert kinds == set(FindingType) - UPSTREAM_TYPES - {FindingType.OPEN_TRANSACTION}
    left = [f for r in run.results for f in r.findings if f.type is FindingType.OFFSET_OF_DELETED_GROUP]
    assert left and all(f.member_id and "before the group's GroupMetadata was deleted" in f.detail for f in left)


def test_clean_data_has_no_findings(clean, tmp_path):
    directory, _manifest = clean
    run = audit(directory, tmp_path / "report", Options(now_ms=CLEAN.now_ms))
    assert [f for r in run.results for f in r.findings] == []
    assert run.summary["findings_total"] == 0
    assert run.summary["records"] > 5_000


def test_a_batch_being_written_is_not_damage(dirty, dirty_audit):
    directory, _manifest = dirty
    run, _report, _manifest = dirty_audit
    writing = [r for r in run.results if r.tail_bytes]
    assert writing
    for result in writing:
        _base, active = segment_files(directory / f"__consumer_offsets-{result.partition}")[-1]
        tail_at = active.stat().st_size - result.tail_bytes
        assert (active.name, tail_at) not in {(f.segment, f.position) for f in result.findings}


def test_findings_say_who_when_and_what(dirty_audit):
    run, _report, _manifest = dirty_audit
    findings = [f for r in run.results for f in r.findings]
    regressions = [f for f in findings if f.type is FindingType.OFFSET_REGRESSION]
    assert regressions
    for f in regressions:
        assert f.committed_offset < f.previous_offset
        assert f.member_id and f.client_id and f.client_host and f.generation >= 1
        assert f.timestamp_ms is not None and f.record_offset is not None
    stale = [f for f in findings if f.type is FindingType.STALE_GENERATION_COMMIT]
    classic = [f for f in stale if not f.group.startswith("epochs-")]
    assert classic and all("-gone" in f.member_id and f.generation >= 1 for f in classic)
    # KIP-848 members: the epoch the commit carried, and the member's epoch then.
    epochs = [f for f in stale if f.group.startswith("epochs-")]
    assert epochs and all(f.member_id.startswith(f"{f.group}-a-") and f.generation == 1
                          and f.detail.startswith("member epoch 1, member at 3 since offset ") for f in epochs)
    damaged = [f for f in findings if f.type is FindingType.BAD_CRC]
    assert damaged and all(f.segment.endswith(".log") and "CRC" in f.detail for f in damaged)


def test_report_tables_and_summary(dirty_audit):
    run, report, _manifest = dirty_audit
    summary = json.loads((report / "summary.json").read_text())
    assert summary == run.summary
    findings = [Finding.from_row(row) for row in pq.read_table(report / "findings.parquet").to_pylist()]
    assert sorted(f.identity() for f in findings) == sorted(f.identity() for r in run.results for f in r.findings)
    for kind, count in summary["findings"].items():
        assert count == sum(1 for f in findings if f.type == kind)
    history = read_history(report)
    assert history.num_rows == summary["commits"] > 0
    final = pq.read_table(report / "final_offsets.parquet")
    assert final.num_rows == summary["offsets"]
    groups = pq.read_table(report / "groups.parquet").to_pylist()
    assert {g["group"] for g in groups} >= {f.group for f in findings if f.group}
    regressed = next(f for f in findings if f.type is FindingType.OFFSET_REGRESSION)
    per_group = summary["findings_per_group"][regressed.group]
    assert per_group["offset_regression"] >= 1
    page = (report / "report.html").read_text()
    # A findings chart per kind found (integrity, hygiene; no upstream: neither its chart nor lag), commits.
    assert page.count("<svg") - page.count('class="timeline"') == 3
    assert "Not checked: these need <code>kgc audit --upstream HOST:PORT</code>" in page
    timelines = page.count('class="timeline"')
    assert 0 < timelines <= 12
    regressed_at = page.index(f"aria-label=\"timeline of {regressed.group}\"")
    assert "offset_regression" in page[regressed_at:page.index("</svg>", regressed_at)]
    rebalances = pq.read_table(report / "group_history.parquet").to_pylist()
    assert {r["group"] for r in rebalances} >= {g["group"] for g in groups if g["state"] != "none"}


def test_charts_read_only_their_groups_commits_and_see_the_whole_history(dirty_audit):
    """The report ranks groups by the partitions' own counts and reads back only the
    drawn groups' commit times: both as reading the whole history would give."""
    run, report, _manifest = dirty_audit
    history = read_history(report, ["group", "timestamp_ms"]).to_pydict()
    counted: dict[str, int] = {}
    for group in history["group"]:
        counted[group] = counted.get(group, 0) + 1
    times = commit_times(report, [(r.partition, r.commits_per_group) for r in run.results])
    assert times.counts == counted
    assert times.busiest == sorted(counted, key=lambda g: (-counted[g], g))
    drawn = times.busiest[:5] + ["no-such-group"]
    for group, stamps in zip(drawn, times.times_of(drawn), strict=True):
        assert stamps.tolist() == [t for g, t in zip(history["group"], history["timestamp_ms"], strict=True)
                                   if g == group]

def test_upstream_bounds_and_lag(dirty, tmp_path):
    directory, manifest = dirty
    run = audit(directory, tmp_path / "report", Options(now_ms=DIRTY.now_ms), log_offsets=manifest.log_offsets,
                upstream="test")
    assert identities(run) == expected_identities(manifest.expected)
    final = pq.read_table(tmp_path / "report" / "final_offsets.parquet").to_pylist()
    for row in final:
        start, end = manifest.log_offsets[row["topic"], row["partition"]]
        assert (row["log_start_offset"], row["log_end_offset"]) == (start, end)
        assert row["lag"] == (end - row["offset"] if row["offset"] <= end else None)
    page = (tmp_path / "report" / "report.html").read_text()
    # Integrity, hygiene and upstream findings charts, commits, lag.
    assert page.count("<svg") - page.count('class="timeline"') == 5


def test_reads_on_past_damage_in_the_middle_of_a_segment(tmp_path):
    """A batch cut short with more batches after it is damage, and the batches after it
    are still read."""
    from coordinator import records
    from storage.api import LogRecord

    partition = tmp_path / "data" / "__consumer_offsets-7"
    partition.mkdir(parents=True)

    def commit(offset: int, value: int) -> bytes:
        record = records.new_offset_commit_record("g", "t", 0, records.OffsetCommitValue(value, -1, "", 1))
        return encode_batch(offset, [LogRecord(records.serialize_key(record.key),
                                               records.serialize_value(record.value), record.headers)], 1)

    first, second, third = commit(0, 10), commit(1, 5), commit(2, 20)
    (partition / "00000000000000000000.log").write_bytes(first + second[:30] + third)
    (partition / "00000000000000000003.log").write_bytes(b"")
    run = audit(tmp_path / "data", tmp_path / "report", Options(now_ms=1))
    found = sorted((f.type, f.position) for r in run.results for f in r.findings)
    # The cut batch's length runs into its neighbour, so its CRC cannot match. (The commits
    # come from no member, generation -1: a simple group, not an orphan.)
    assert found == [(FindingType.BAD_CRC, len(first))]
    assert run.results[0].final_offsets[0]["offset"] == 20


def test_a_log_kafka_wrote_is_judged_by_what_its_records_carry(tmp_path):
    directory = tmp_path / "data"
    manifest = generate(directory, KAFKA_WRITTEN)
    run = audit(directory, tmp_path / "report", Options(now_ms=KAFKA_WRITTEN.now_ms),
                log_offsets=manifest.log_offsets, upstream="test")
    found = identities(run)
    assert found == expected_identities(manifest.expected)
    kinds = {identity[0] for identity in found}
    # Stale generations need the generation header; everything else is still judged (but
    # the generator deletes no topic: test_an_offset_of_a_topic_the_cluster_lacks).
    assert kinds == set(FindingType) - {FindingType.STALE_GENERATION_COMMIT, FindingType.OFFSET_OF_DELETED_TOPIC,
                                        FindingType.OFFSET_OF_RECREATED_TOPIC, FindingType.OPEN_TRANSACTION}
    findings = [f for r in run.results for f in r.findings]
    simple = [f for f in findings if f.group and f.group.startswith("simple-")]
    assert simple and all(f.type is FindingType.ORPHANED_OFFSET and "assign()" in f.detail for f in simple)
    left = [f for f in findings if f.type is FindingType.OFFSET_OF_DELETED_GROUP]
    assert left and all(f.group.startswith("leftover-") and "deleted at offset" in f.detail for f in left)
    assert all(f.member_id is None and f.client_id is None for f in findings)


def test_an_offset_of_a_topic_the_cluster_lacks(tmp_path):
    """A topic the cluster answers nothing for was deleted under the group; a partition
    the cluster has no bounds for, of a topic it has, is left unjudged."""
    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, [offset_commit_record("g")], 1))
    gone = audit(tmp_path / "data", tmp_path / "gone", Options(now_ms=2), log_offsets={("other", 0): (0, 9)},
                 upstream="test")
    assert [(f.type, f.group, f.topic, f.partition, f.committed_offset) for r in gone.results for f in r.findings
            if f.type in UPSTREAM_TYPES] == [(FindingType.OFFSET_OF_DELETED_TOPIC, "g", "t", 0, 5)]
    unbounded = audit(tmp_path / "data", tmp_path / "unbounded", Options(now_ms=2), log_offsets={("t", 1): (0, 9)},
                      upstream="test")
    assert [f for r in unbounded.results for f in r.findings if f.type in UPSTREAM_TYPES] == []


def test_an_offset_whose_commit_recorded_the_old_id_of_a_recreated_topic(tmp_path):
    """A commit naming its topic by id keeps the id (OffsetCommitValue v4): one whose id is
    not the cluster's id of that name now was committed before the topic was deleted and
    created again. Its bounds are the new topic's, so it is not judged by them; without
    the cluster's ids (Metadata before v10) it is not judged by id either."""
    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, recreated_topic_log(), 1))
    run = audit(tmp_path / "data", tmp_path / "report", Options(now_ms=2), log_offsets=RECREATED_LOG_OFFSETS,
                upstream="test", topic_ids=RECREATED_TOPIC_IDS)
    found = [f for r in run.results for f in r.findings]
    assert {(f.type.value, f.group, f.topic, f.partition, f.committed_offset) for f in found} == RECREATED_FINDINGS
    [old] = [f for f in found if f.group == "old"]
    assert old.detail == ("committed to topic id 00000000-0000-4000-8000-00000000000a; the cluster's t is "
                          "topic id 00000000-0000-4000-8000-00000000000b")
    rows = {r["group"]: r for r in pq.read_table(tmp_path / "report" / "final_offsets.parquet").to_pylist()}
    assert (rows["old"]["topic_id"], rows["old"]["lag"], rows["old"]["log_end_offset"]) == \
        ("00000000-0000-4000-8000-00000000000a", None, None)
    assert (rows["new"]["topic_id"], rows["new"]["lag"]) == ("00000000-0000-4000-8000-00000000000b", 6)
    assert rows["by-name"]["topic_id"] is None
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["findings"]["offset_of_recreated_topic"] == 2
    assert "offset_of_recreated_topic" in (tmp_path / "report" / "report.html").read_text()
    without_ids = audit(tmp_path / "data", tmp_path / "no-ids", Options(now_ms=2), log_offsets=RECREATED_LOG_OFFSETS,
                        upstream="test")
    assert {(f.type.value, f.group) for r in without_ids.results for f in r.findings} == {
        ("offset_of_deleted_topic", "gone"), ("offset_above_log_end", "new-past-end"),
        ("offset_above_log_end", "old-past-end")}


def test_groups_of_kafka_4_protocols_are_not_orphans(tmp_path):
    """Offsets of a KIP-848 consumer group (its metadata in record type 3, not
    GroupMetadata) are not orphaned while the group exists, and are left behind once its
    type-3 record is deleted."""
    from coordinator import records
    from storage.api import LogRecord

    partition = tmp_path / "data" / "__consumer_offsets-0"
    partition.mkdir(parents=True)
    commit, consumer_group = offset_commit_record, consumer_group_record
    epoch = records.serialize_value(records.ConsumerGroupMetadataValue(1))
    share_group = b"\x00\x0b\x00\x05share"    # type 11, a share group's record: not decoded
    log = [consumer_group("new", epoch), commit("new"),
           consumer_group("gone", epoch), commit("gone"), consumer_group("gone", None),
           LogRecord(share_group, b"\x00\x00anything"), commit("share")]
    (partition / "00000000000000000000.log").write_bytes(encode_batch(0, log, 1))
    run = audit(tmp_path / "data", tmp_path / "report", Options(now_ms=2))
    assert sorted((f.type, f.group) for r in run.results for f in r.findings) == [
        (FindingType.OFFSET_OF_DELETED_GROUP, "gone")]


def test_a_time_window_reports_what_its_records_show_and_the_state_at_its_end(dirty, dirty_audit, tmp_path):
    directory, _manifest = dirty
    full, _report, _manifest = dirty_audit
    history = read_history(_report)
    stamps = sorted(history["timestamp_ms"].to_pylist())
    since, until = stamps[len(stamps) // 4], stamps[3 * len(stamps) // 4]
    window = audit(directory, tmp_path / "window", Options(now_ms=DIRTY.now_ms, since_ms=since, until_ms=until))
    per_record = {FindingType.OFFSET_REGRESSION, FindingType.STALE_GENERATION_COMMIT}
    found = [f for r in window.results for f in r.findings if f.type in per_record]
    expected = [f for r in full.results for f in r.findings if f.type in per_record and since <= f.timestamp_ms < until]
    assert expected and sorted(map(repr, found)) == sorted(map(repr, expected))
    kept = read_history(tmp_path / "window")["timestamp_ms"].to_pylist()
    assert kept and all(since <= t < until for t in kept)
    assert window.summary["commits"] == len(kept) < full.summary["commits"]
    final = pq.read_table(tmp_path / "window" / "final_offsets.parquet").to_pylist()
    assert final and all(row["timestamp_ms"] < until for row in final)
    # Damage is reported whatever the window: a damaged batch has no time to trust.
    assert {f.identity() for r in window.results for f in r.findings if f.type is FindingType.BAD_CRC} == \
        {f.identity() for r in full.results for f in r.findings if f.type is FindingType.BAD_CRC}


def test_cli_exit_code_for_chosen_finding_types(dirty, clean, tmp_path, capsys):
    from coordinator.offline.cli import main

    directory, _manifest = dirty
    common = ["--engine", "python", "--now-ms", str(DIRTY.now_ms)]
    assert main(["audit", str(directory), "--out", str(tmp_path / "a"), "--fail-on-findings",
                 "offset_regression,bad_crc", *common]) == 2
    assert "failing: bad_crc, offset_regression found" in capsys.readouterr().err
    assert main(["audit", str(directory), "--out", str(tmp_path / "b"), "--fail-on-findings", *common]) == 2
    assert main(["audit", str(clean[0]), "--out", str(tmp_path / "c"), "--fail-on-findings", "bad_crc",
                 *common]) == 0
    assert main(["audit", str(directory), "--out", str(tmp_path / "d"), *common]) == 0
    with pytest.raises(SystemExit) as exit_:
        main(["audit", str(directory), "--out", str(tmp_path / "e"), "--fail-on-findings", "offset_regresion"])
    assert exit_.value.code == 2
    assert "unknown finding type offset_regresion; known: offset_regression" in capsys.readouterr().err
    assert main(["audit", str(directory), "--out", str(tmp_path / "f"), "--since", "2026-01-01T00:00",
                 "--until", str(DIRTY.now_ms), "--engine", "python"]) == 0
    assert "audited" in capsys.readouterr().out


def test_progress_bar_counts_partition_tasks_on_a_terminal():
    import io

    from coordinator.offline.progress import Progress
    from coordinator.offline.runner import local_map

    out = io.StringIO()
    progress = Progress(3, "audit", stream=out, force=True)
    assert local_map(lambda task: task * 2, [1, 2, 3], progress) == [2, 4, 6]
    progress.close()
    assert out.getvalue().count("\r") == 3 and "3/3 partitions" in out.getvalue() and out.getvalue().endswith("\n")
    quiet = io.StringIO()             # not a terminal: nothing drawn
    off = Progress(3, "audit", stream=quiet)
    local_map(lambda task: task, [1, 2, 3], off)
    off.close()
    assert quiet.getvalue() == ""


def test_a_group_migrated_between_protocols_and_back_has_no_findings(tmp_path):
    """A classic group upgraded online (its GroupMetadata deleted, KIP-848 records after
    it), commits from its classic and KIP-848 members at their epochs, then downgraded
    (its type-3 record deleted, GroupMetadata again): nothing orphaned, deleted or stale."""
    import asyncio

    from tests.support.data_dir_writer import write
    from tests.support.group_context import GroupTestContext
    from tests.support.group_scenarios import classic_group, rejoin

    ctx = GroupTestContext()
    ctx.set_topics(t=4)
    a, b = classic_group(ctx)
    ctx.commit(version=7, member_id=a, generation_id=1, offsets=(("t", 0, 5, None),))
    ctx.consumer_heartbeat(member_id="c")
    for m in (a, b):
        rejoin(ctx, m)
    ctx.consumer_heartbeat(member_id="c", member_epoch=2, owned={})
    assert ctx.commit(version=7, member_id=a, generation_id=2, offsets=(("t", 0, 7, None),)).response \
        .topics[0].partitions[0].error_code == 0
    assert ctx.commit(version=9, member_id="c", generation_id=2, offsets=(("t", 1, 3, None),)).response \
        .topics[0].partitions[0].error_code == 0
    ctx.consumer_heartbeat(member_id="c", member_epoch=-1)
    assert "g" in ctx.shard.groups
    asyncio.run(write(tmp_path / "data", [ctx.written], "g"))
    run = audit(tmp_path / "data", tmp_path / "report", Options(now_ms=ctx.clock.now_ms()))
    assert [f for r in run.results for f in r.findings] == []


@pytest.mark.parametrize("scanner", ["columns", "records"])
def test_a_transaction_left_open_is_flagged_and_a_decided_one_is_not(tmp_path, scanner):
    # given producer 7's offsets ended by its marker, and producer 9's with none after them
    directory = tmp_path / "data" / "__consumer_offsets-0"
    directory.mkdir(parents=True)
    commit = offset_commit_record("txn-group")
    (directory / f"{0:020d}.log").write_bytes(b"".join([
        encode_batch(0, [commit], 1_000, TxnBatch(7, 0)),
        encode_batch(1, [], 1_000, TxnBatch(7, 0, CONTROL_COMMIT)),
        encode_batch(2, [commit], 1_000, TxnBatch(9, 2)),
    ]))
    run = audit(tmp_path / "data", tmp_path / "report", Options(now_ms=2_000, scanner=scanner))
    # then only producer 9's transaction is reported, where it starts
    [finding] = [f for r in run.results for f in r.findings if f.type is FindingType.OPEN_TRANSACTION]
    assert (finding.record_offset, finding.segment) == (2, f"{0:020d}.log")
    assert "producer 9" in finding.detail
