"""Every workload at tiny size against a real kgc process, so the bench keeps working.

No timing is asserted: what must hold is that each workload measures what it names (every
figure has a value, round trips happened, nothing failed), and that the compare driver
and the CLI put kgc and Tansu side by side.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.bench import compare as driver
from coordinator.bench import datadir
from coordinator.bench.context import Sizes
from coordinator.records import GroupMetadataKey, OffsetCommitKey, deserialize
from storage.file_store import FileLogStore
from tests.bench import java_group
from tests.bench.against_kafka import coordinate_every_group_on
from tests.support.admin import committed_offsets
from tests.support.kgc import kgc_in_front_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]

EXPECTED = {
    "join": ["join 1: FindCoordinator to all synced", "join 1: last JoinGroup to all synced",
             "join 3: FindCoordinator to all synced", "join 3: last JoinGroup to all synced"],
    "rebalance": ["rebalance 3: LeaveGroup to all others synced", "rebalance 3: last JoinGroup to all others synced",
                  "rebalance 3: a new member's FindCoordinator to all synced",
                  "rebalance 3: last JoinGroup to all synced, after a new member"],
    "heartbeat": ["heartbeat 4 members in 2 groups: heartbeats/s", "heartbeat 4 members in 2 groups: p50",
                  "heartbeat 4 members in 2 groups: p99", "heartbeat 4 members in 2 groups: target CPU per heartbeat"],
    "commit": ["commit 2 clients x 5 partitions: partition-commits/s",
               "commit 2 clients x 5 partitions: OffsetCommit requests/s",
               "commit 2 clients x 5 partitions: p50", "commit 2 clients x 5 partitions: p99",
               "commit 2 clients x 5 partitions: target CPU per OffsetCommit"] * 2,
    "sync-commit": [f"sync commit 2 clients x 2 partitions: {m}"
                    for m in ("commits/s", "p50", "p99", "target CPU per commit")] * 2
    + [f"sync commit 2 clients x 2 partitions: {m}"
       for m in ("kgc fsync mean", "fsync cost / kgc fsync", "disk fsync p50", "fsync cost / disk fsync")],
    "fetch-offsets": [f"fetch offsets 20 partitions x 2 groups, 2 clients, v{v}: {m}"
                      for v in (5, 9) for m in ("fetches/s", "partitions/s", "p50", "p99", "target CPU per OffsetFetch")],
    "load": ["load 0 records (empty data dir): spawn to all partitions loaded",
             "load 2000 records: spawn to all partitions loaded", "load 2000 records: replay rate"],
    "memory": ["memory: RSS per committed offset (1000 offsets)",
               "memory: RSS per member incl. its connection (20 members)",
               "memory: RSS per idle connection (20 connections)",
               "memory: RSS per member, connection excluded"],
}


@pytest.mark.parametrize("workload", list(driver.WORKLOADS))
def test_each_workload_measures_every_figure_on_kgc(workload, tmp_path):
    samples = asyncio.run(driver.run_all([driver.choose_target("kgc")], [workload], Sizes.tiny(), 1, tmp_path))
    figures = [s.figure for s in samples]
    assert [f.metric for f in figures] == EXPECTED[workload]
    assert all(f.value is not None for f in figures), [f for f in figures if f.value is None]
    assert all(f.config.startswith("kgc fsync=") for f in figures)
    throughputs = [f for f in figures if f.unit == "/s"]
    assert all(f.value > 0 for f in throughputs)
    if workload in ("commit", "sync-commit"):
        assert {f.config.split(",")[0] for f in figures} == {"kgc fsync=always", "kgc fsync=never"}


def test_generated_data_dir_holds_exactly_the_records_asked_for(tmp_path):
    asyncio.run(datadir.generate(tmp_path / "d", 3_000, groups=10, partitions_per_group=8))

    async def read_back():
        store = FileLogStore(tmp_path / "d", fsync="never")
        await store.open()
        try:
            return [deserialize(r.key, r.value)
                    for p in range(store.num_partitions) for b in store.read(p) for r in b.records]
        finally:
            await store.close()

    decoded = asyncio.run(read_back())
    assert len(decoded) == 3_000
    assert sum(isinstance(key, GroupMetadataKey) for key, _ in decoded) == 10
    commits = [(key, value) for key, value in decoded if isinstance(key, OffsetCommitKey)]
    assert len({(k.group, k.partition) for k, _ in commits}) == 10 * 8
    assert max(v.offset for _, v in commits) == -(-(3_000 - 10) // 80)


def test_compare_cli_reports_kgc_beside_tansu_with_ratios(tmp_path):
    report = tmp_path / "report.md"
    raw = tmp_path / "samples.json"
    done = subprocess.run(
        [sys.executable, "-m", "coordinator.bench", "compare", "--tiny", "--repeats", "2",
         "--workloads", "commit,load", "--markdown", str(report), "--json", str(raw)],
        cwd=REPO, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    text = report.read_text()
    assert "| figure | kgc config | kgc (median) | tansu (median) | kgc/tansu |" in text
    commit_rows = [line for line in text.splitlines() if line.startswith("| commit 2 clients x 5 partitions:")]
    assert len(commit_rows) == 10  # five figures, with fsync always and never
    assert all(" n/a |" not in row.split("|")[5] for row in commit_rows)
    assert "keeps groups in its own storage engine" in text   # load: n/a on Tansu, with the reason
    assert "cores (nproc)" in text and "kgc commit" in text
    samples = json.loads(raw.read_text())["samples"]
    assert {(s["target"], s["repeat"]) for s in samples} == {("kgc", 1), ("kgc", 2), ("tansu", 1), ("tansu", 2)}


def test_the_protocols_bench_measures_every_figure_through_the_cli():
    """`kgc bench protocols` at tiny size: KIP-848, classic eager and classic cooperative
    groups on one kgc in front of Tansu each absorb and lose a member, and both heartbeat
    flat out."""
    out = subprocess.run([sys.executable, "-m", "coordinator", "bench", "protocols", "--members", "3",
                          "--partitions", "6", "--duration-s", "0.3", "--repeats", "1",
                          "--assignor-members", "10", "--assignor-partitions", "40"],
                         cwd=REPO, capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in out.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| figure")}
    for protocol in ("KIP-848", "classic eager", "classic cooperative"):
        for change in ("absorbs", "loses"):
            assert float(rows[f"3-member group {change} one member, {protocol} (ms)"].replace(",", "")) > 0
        if protocol != "KIP-848":
            assert rows[f"{protocol} / KIP-848, 3-member group absorbs one member"].endswith("×")
    for protocol in ("KIP-848", "classic"):
        assert float(rows[f"heartbeats/s, 3 members flat out, {protocol}"].replace(",", "")) > 0
    assert float(rows["uniform assignor, 10 members x 40 partitions, heterogeneous (ms)"]) > 0


def test_compare_puts_kgc_beside_kafkas_own_coordinator_under_the_names_given(kafka, tmp_path):
    """The targets of tests/bench/against_kafka.py: kgc in front of a real Kafka, and that
    Kafka's own coordinator, each named in the report (NAME=HOST:PORT). Every figure is
    measured on both, so each has a ratio; the memory workload commits to partitions Kafka
    has (it refuses the others), on its first run only: a second run on the same processes
    would reuse memory the first freed."""
    node = kafka.nodes[0]
    coordinate_every_group_on(kafka, node)
    with kgc_in_front_of(kafka, "--fsync", "never", "--data-dir", str(tmp_path / "data"),
                         log_path=str(tmp_path / "kgc.log")) as kgc:
        targets = [driver.choose_target(f"kgc={kgc.bootstrap}", kgc.proc.pid),
                   driver.choose_target(f"kafka={node.address}", node.proc.pid)]
        # A second of warm-up: the suite's Kafka may answer its first commit of a run later
        # than tiny's window would end on a busy machine, which would leave nothing measured.
        sizes = dataclasses.replace(Sizes.tiny(), warmup_s=1.0)
        samples = asyncio.run(driver.run_all(targets, ["sync-commit", "fetch-offsets", "memory"], sizes, 2, tmp_path))
    assert {s.target for s in samples} == {"kgc", "kafka"}
    again = [s for s in samples if s.workload == "memory" and s.repeat == 2]
    assert len(again) == 8 and all(s.figure.value is None for s in again), again
    assert {s.figure.note for s in again} == {"n/a: a running target is measured on the first run only"}
    failed = [s for s in samples if s.figure.value is None and "per idle connection" not in s.figure.metric
              and s not in again]
    assert not failed, failed
    assert {s.figure.config for s in samples if s.target == "kafka"} == {
        f"kafka at {node.address}, its own configuration"}
    comparisons = driver.compare(driver.summarize(samples), "kgc", "kafka")
    timed = [c for c in comparisons if c.mine is not None and c.mine.unit in ("ms", "/s")]
    assert len(timed) == 11 and all(c.ratio is not None for c in timed), comparisons


@pytest.mark.parametrize("protocol", ["eager", "cooperative", "consumer"])
def test_the_java_group_bench_measures_the_first_assignment_every_commit_and_a_rebalance(kafka, tmp_path, protocol):
    """tests/bench/java_group.py at tiny size: the Java members settle, each commits the
    partitions it holds, then a member joins and one leaves; the settling time, every
    commit's latency and the two rebalances' times come back, directly and through kgc;
    what they committed last is what the group holds."""
    partitions = 2 * java_group.PARTITIONS_EACH
    topic = kafka.create_topic(f"java-group-smoke-{protocol}-{tmp_path.name[-6:]}", partitions)
    with kgc_in_front_of(kafka, "--fsync", "never", "--data-dir", str(tmp_path / "data"),
                         log_path=str(tmp_path / "kgc.log")) as kgc:
        for bootstrap in (kafka.bootstrap, kgc.bootstrap):
            done = java_group.run(bootstrap, topic, partitions, protocol, members=2, commits=5, churn=(0, 0))
            assert done.settled_ms > 0 and done.commits_per_s > 0, done
            assert done.joined_ms > 0 and done.left_ms > 0, done
            assert len(done.latencies_us) == 10 and all(t > 0 for t in done.latencies_us), done
            assert committed_offsets(bootstrap, done.group) == dict.fromkeys(range(partitions), 5)
