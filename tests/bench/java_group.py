"""The unmodified Java client (kafka-clients 4.4) in groups, kgc against Kafka's own
coordinator, in one run on the same Kafka started here:

    .venv/bin/python -m tests.bench.java_group --nodes 1 --rounds 3
    .venv/bin/python -m tests.bench.java_group --nodes 3 --rounds 3 --workloads sync-commits

Members run in one JVM, a consumer per thread (tests/java/GroupOfMembers.java); each run is
a new group, asked of Kafka directly, then through kgc, alternating, each round. The JVM runs
at a lower CPU priority (`nice -n 10`, `--load-nice`) for both targets alike: 200 consumers
are 400 threads, and the kernel shares the cores among threads, so at equal priority they
would take the cores from the coordinator they measure; in production they run on other
machines. Both sides rebalance with no initial delay, and KIP-848 members heartbeat at both
sides' default interval (5 s).

- first-assignment: groups of 1, 50 and 200 members (`--sizes`) on a topic of three
  partitions per member subscribe at once, with the classic protocol's eager (range) and
  cooperative-sticky assignors and with `group.protocol=consumer`; the time from the
  subscriptions to the moment the group's assignment is complete and balanced (every member
  holds partitions, none more than one more than another), as it then stays for a second.
- rebalance: a settled group of 50 (`--rebalance-members`), with each protocol as above; a
  new member subscribes, and the time until the group is balanced again over every member,
  as it then stays for a second; then the first member closes (leaving the group), and the
  time until the others are balanced again. Each change comes 11 to 16 s after the group
  last settled (`QUIET_MS`, `JITTER_MS`), so it meets members heartbeating at their regular
  interval, as in a group that has been steady, at a random point of their cycle: 3 s for
  classic members (the Java client's default), which learn of a rebalance from a heartbeat's
  answer, and both coordinators' 5 s for KIP-848 members.
- sync-commits: eight members of one group, each holding 3 of 24 partitions, commit their
  own partitions with `commitSync` 300 times in a row, all at once, as an application
  commits after each batch; eager, then `group.protocol=consumer` (whose commits name topics
  by id, OffsetCommit v10).

`--nodes 1`: Kafka with `__consumer_offsets` at replication factor 1 against kgc's `fsync
never` (neither durable before the answer); `--nodes 3`: replication factor 3 (min ISR 2)
against `fsync always` (both durable before the answer). A benchmark tool, not a test: it
prints medians over the rounds, and kgc / Kafka."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from coordinator.bench.stats import Latencies
from tests.support.kafka import THREE_HOSTS, KafkaCluster
from tests.support.kafka_dist import compiled, java_command
from tests.support.kgc import kgc_in_front_of

SOURCE = Path(__file__).resolve().parent.parent / "java" / "GroupOfMembers.java"
PARTITIONS_EACH = 3
COMMIT_MEMBERS = 8
COMMITS = 300
SIZES = (1, 50, 200)
PROTOCOLS = ("eager", "cooperative", "consumer")    # first assignment and rebalance
COMMIT_PROTOCOLS = ("eager", "consumer")
REBALANCE_MEMBERS = 50
# Before each change of membership: long enough for every member to be back at its regular
# heartbeat interval and to have heartbeat at it once, as in a group that has been steady.
# kgc's members of a group that settled heartbeat at 500 ms for up to one regular interval
# (5 s) after its last assignment, then at 5 s (docs/kip848.md, its bullet "Settling
# heartbeats"). Then a random spell of up to one regular interval: a settled group's members
# heartbeat nearly in step, and a change falls anywhere in their cycle, as an application's
# comings and goings do.
QUIET_MS = 11_000
JITTER_MS = 5_000
WORKLOADS = ("first-assignment", "rebalance", "sync-commits")
RUN_TIMEOUT_S = 300
# 200 consumers, each with its buffers and threads, in one JVM.
JVM = ("-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
LOAD_NICE = 10


@dataclass(frozen=True)
class Run:
    group: str
    settled_ms: int
    joined_ms: int      # -1: not measured (no churn)
    left_ms: int
    commits_per_s: float
    latencies_us: list[int]


def run(bootstrap: str, topic: str, partitions: int, protocol: str, members: int, commits: int,
        nice: int = LOAD_NICE, churn: tuple[int, int] | None = None) -> Run:
    """One run of GroupOfMembers in a new group, its JVM at `nice` (0: this process's priority);
    with `churn` (quiet ms, jitter ms), a member joins the settled group and then one leaves,
    each the quiet time and a random spell of up to the jitter after the group last settled."""
    group = f"java-{protocol}-{uuid.uuid4().hex[:8]}"
    java = java_command("GroupOfMembers", bootstrap, group, topic, str(partitions), str(members), str(commits),
                        protocol, *map(str, churn or ()), jvm=JVM, cp=compiled(SOURCE))
    done = subprocess.run(["nice", "-n", str(nice), *java],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"GroupOfMembers against {bootstrap} failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    rate = members * commits / answer["seconds"] if commits else 0.0
    return Run(group, answer["settled_ms"], answer["joined_ms"], answer["left_ms"], rate, answer["latencies_us"])


def alternating(rounds: int, targets: dict[str, str], measure) -> dict[str, list[float]]:
    """Per target, the median over `rounds` of each figure `measure(bootstrap)` returns."""
    rows: dict[str, list[tuple[float, ...]]] = {name: [] for name in targets}
    for _ in range(rounds):
        for name, bootstrap in targets.items():
            rows[name].append(measure(bootstrap))
    return {name: [statistics.median(column) for column in zip(*figures, strict=True)]
            for name, figures in rows.items()}


def first_assignment(kafka: KafkaCluster, targets: dict[str, str], sizes: list[int], rounds: int, nice: int) -> None:
    print("First assignment: subscriptions to a complete, balanced assignment (ms)\n")
    print("| members | protocol | Kafka | kgc | kgc / Kafka |\n|---:|---|---:|---:|---:|", flush=True)
    for members in sizes:
        partitions = PARTITIONS_EACH * members
        topic = kafka.create_topic(f"java-first-{members}-{uuid.uuid4().hex[:6]}", partitions)
        for protocol in PROTOCOLS:
            medians = alternating(rounds, targets, lambda bootstrap, p=protocol, n=members, t=topic, k=partitions: (
                run(bootstrap, t, k, p, n, 0, nice).settled_ms,))
            kafka_ms, kgc_ms = medians["Kafka"][0], medians["kgc"][0]
            print(f"| {members} | {protocol} | {kafka_ms:,.0f} | {kgc_ms:,.0f} | {kgc_ms / kafka_ms:.2f} |", flush=True)
    print()


def rebalance(kafka: KafkaCluster, targets: dict[str, str], members: int, rounds: int, nice: int) -> None:
    print(f"Rebalance of a settled group of {members}: a member joins, then one leaves; each from the change "
          "to the group's balance again (ms), at the clients' and the coordinators' default timers\n")
    print("| protocol | Kafka: joins / leaves | kgc: joins / leaves | kgc / Kafka |\n|---|---:|---:|---:|", flush=True)
    partitions = PARTITIONS_EACH * members
    topic = kafka.create_topic(f"java-rebalance-{members}-{uuid.uuid4().hex[:6]}", partitions)
    for protocol in PROTOCOLS:
        def measure(bootstrap: str, protocol: str = protocol) -> tuple[float, float]:
            done = run(bootstrap, topic, partitions, protocol, members, 0, nice, churn=(QUIET_MS, JITTER_MS))
            return done.joined_ms, done.left_ms

        medians = alternating(rounds, targets, measure)
        (k_join, k_leave), (g_join, g_leave) = medians["Kafka"], medians["kgc"]
        print(f"| {protocol} | {k_join:,.0f} / {k_leave:,.0f} | {g_join:,.0f} / {g_leave:,.0f} | "
              f"{g_join / k_join:.2f} / {g_leave / k_leave:.2f} |", flush=True)
    print()


def sync_commits(kafka: KafkaCluster, targets: dict[str, str], rounds: int, nice: int) -> None:
    partitions = PARTITIONS_EACH * COMMIT_MEMBERS
    topic = kafka.create_topic(f"java-commits-{uuid.uuid4().hex[:6]}", partitions)
    print(f"Synchronous commits: {COMMIT_MEMBERS} members, {PARTITIONS_EACH} partitions each, {COMMITS} "
          "commitSync each\n")
    print("| protocol | target | commits/s | p50 ms | p99 ms |\n|---|---|---:|---:|---:|", flush=True)
    for protocol in COMMIT_PROTOCOLS:
        def measure(bootstrap: str, protocol: str = protocol) -> tuple[float, float, float]:
            done = run(bootstrap, topic, partitions, protocol, COMMIT_MEMBERS, COMMITS, nice)
            latencies = Latencies()
            for us in done.latencies_us:
                latencies.add(us * 1000)
            return done.commits_per_s, latencies.percentile_ms(50), latencies.percentile_ms(99)

        medians = alternating(rounds, targets, measure)
        for name, (rate, p50, p99) in medians.items():
            print(f"| {protocol} | {name} | {rate:,.0f} | {p50:.2f} | {p99:.2f} |", flush=True)
        (k_rate, k_p50, k_p99), (g_rate, g_p50, g_p99) = medians["Kafka"], medians["kgc"]
        print(f"| {protocol} | kgc / Kafka | {g_rate / k_rate:.2f} | {g_p50 / k_p50:.2f} | {g_p99 / k_p99:.2f} |",
              flush=True)
    print()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.java_group", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="first-assignment group sizes")
    parser.add_argument("--rebalance-members", type=int, default=REBALANCE_MEMBERS)
    parser.add_argument("--load-nice", type=int, default=LOAD_NICE,
                        help="the members' JVM's niceness, for both targets (0: as this process)")
    args = parser.parse_args(argv)
    workloads = args.workloads.split(",")
    if unknown := set(workloads) - set(WORKLOADS):
        parser.error(f"unknown workloads {sorted(unknown)}; known: {', '.join(WORKLOADS)}")
    fsync = "always" if args.nodes == 3 else "never"
    hosts = THREE_HOSTS if args.nodes == 3 else ("127.0.0.1",)
    with tempfile.TemporaryDirectory(prefix="kgc-java-group-") as tmp:
        work = Path(tmp)
        settings = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "50"}
        with KafkaCluster(work / "kafka", hosts, settings=settings, few_threads=False) as kafka, \
                kgc_in_front_of(kafka, "--fsync", fsync, "--initial-rebalance-delay-ms", "0",
                                "--data-dir", str(work / "kgc-data"), "--log-level", "WARNING",
                                log_path=str(work / "kgc.log")) as kgc:
            print(f"Apache Kafka {kafka.version}, {args.nodes} node(s), `__consumer_offsets` replication factor "
                  f"{args.nodes}; kgc `--fsync {fsync}` in front of it; the members' JVM at nice {args.load_nice}; "
                  f"{args.rounds} round(s), medians. "
                  f"Command: `python -m tests.bench.java_group {' '.join(argv)}`\n", flush=True)
            targets = {"Kafka": kafka.bootstrap, "kgc": kgc.bootstrap}
            if "first-assignment" in workloads:
                first_assignment(kafka, targets, [int(n) for n in args.sizes.split(",")], args.rounds, args.load_nice)
            if "rebalance" in workloads:
                rebalance(kafka, targets, args.rebalance_members, args.rounds, args.load_nice)
            if "sync-commits" in workloads:
                sync_commits(kafka, targets, args.rounds, args.load_nice)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
