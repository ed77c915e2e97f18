"""Synchronous commits of the Java client (kafka-clients 4.4, unmodified), kgc against Kafka's
own coordinator, in one run on the same Kafka started here:

    .venv/bin/python -m tests.bench.java_sync_commits --nodes 1 --rounds 3
    .venv/bin/python -m tests.bench.java_sync_commits --nodes 3 --rounds 3

Eight members of one group (tests/java/SyncCommits.java: one JVM, a consumer per thread),
each holding 3 of the topic's 24 partitions, commit their own partitions with `commitSync`
300 times in a row, all at once, as an application commits after each batch; first with the
classic protocol, then with `group.protocol=consumer` (whose commits name topics by id,
OffsetCommit v10). Kafka is asked directly, then through kgc, alternating, each round.
`--nodes 1`: Kafka with `__consumer_offsets` at replication factor 1 against kgc's
`fsync never` (neither durable before the answer); `--nodes 3`: replication factor 3 (min
ISR 2) against `fsync always` (both durable before the answer). Both sides rebalance with no
initial delay. A benchmark tool, not a test: it prints commits per second and latency
percentiles, medians over the rounds, and kgc / Kafka."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests.support.kafka import THREE_HOSTS, KafkaCluster
from tests.support.kafka_dist import compiled, java_command
from tests.support.kgc import kgc_in_front_of

SOURCE = Path(__file__).resolve().parent.parent / "java" / "SyncCommits.java"
PARTITIONS = 24
MEMBERS = 8
COMMITS = 300
RUN_TIMEOUT_S = 300
PROTOCOLS = ("classic", "consumer")


def run(bootstrap: str, topic: str, protocol: str, members: int, commits: int) -> tuple[str, float, list[int]]:
    """One run of SyncCommits in a new group: the group, commits per second, and every
    commit's latency (µs)."""
    group = f"java-sync-{protocol}-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(java_command("SyncCommits", bootstrap, group, topic, str(PARTITIONS), str(members),
                                       str(commits), protocol, cp=compiled(SOURCE)),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"SyncCommits against {bootstrap} failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return group, members * commits / answer["seconds"], answer["latencies_us"]


def percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] / 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.java_sync_commits", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--members", type=int, default=MEMBERS)
    parser.add_argument("--commits", type=int, default=COMMITS, help="per member")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    args = parser.parse_args(argv)
    fsync = "always" if args.nodes == 3 else "never"
    hosts = THREE_HOSTS if args.nodes == 3 else ("127.0.0.1",)
    with tempfile.TemporaryDirectory(prefix="kgc-java-commits-") as tmp:
        work = Path(tmp)
        settings = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "50"}
        with KafkaCluster(work / "kafka", hosts, settings=settings) as kafka, \
                kgc_in_front_of(kafka, "--fsync", fsync, "--initial-rebalance-delay-ms", "0",
                                "--data-dir", str(work / "kgc-data"), "--log-level", "WARNING",
                                log_path=str(work / "kgc.log")) as kgc:
            topic = kafka.create_topic(f"java-sync-{uuid.uuid4().hex[:6]}", PARTITIONS)
            print(f"Apache Kafka {kafka.version}, {args.nodes} node(s), `__consumer_offsets` replication factor "
                  f"{args.nodes}; kgc `--fsync {fsync}` in front of it. {args.members} Java members of one group, "
                  f"{PARTITIONS // args.members} partitions each, {args.commits} commitSync each, {args.rounds} "
                  f"round(s). Command: `python -m tests.bench.java_sync_commits {' '.join(argv)}`\n", flush=True)
            print("| protocol | target | commits/s | p50 ms | p99 ms |\n|---|---|---:|---:|---:|")
            for protocol in args.protocols.split(","):
                figures: dict[str, list[tuple[float, float, float]]] = {"Kafka": [], "kgc": []}
                for _ in range(args.rounds):
                    for name, bootstrap in (("Kafka", kafka.bootstrap), ("kgc", kgc.bootstrap)):
                        _, rate, took = run(bootstrap, topic, protocol, args.members, args.commits)
                        figures[name].append((rate, percentile(took, 0.5), percentile(took, 0.99)))
                medians = {name: [statistics.median(column) for column in zip(*rows, strict=True)]
                           for name, rows in figures.items()}
                for name, (rate, p50, p99) in medians.items():
                    print(f"| {protocol} | {name} | {rate:,.0f} | {p50:.2f} | {p99:.2f} |", flush=True)
                (k_rate, k_p50, k_p99), (g_rate, g_p50, g_p99) = medians["Kafka"], medians["kgc"]
                print(f"| {protocol} | kgc / Kafka | {g_rate / k_rate:.2f} | {g_p50 / k_p50:.2f} | "
                      f"{g_p99 / k_p99:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
