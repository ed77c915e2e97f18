"""Failover and commit cost of several kgc instances, against Kafka's own coordinator, on one
three-node Kafka cluster (127.0.0.11-13, replication factor 3, min ISR 2) started here.

    .venv/bin/python -m tests.bench.failover --rounds 3     # --commits-only: no failover
    .venv/bin/python -m tests.bench.failover --not-durable  # one node, RF 1, against fsync never

Failover: a librdkafka member (confluent-kafka) commits synchronously in a loop; the process
that coordinates its group is killed with SIGKILL: on Kafka the broker leading the group's
`__consumer_offsets` partition, through kgc the instance that owns the group's partition
(three instances over the replicated store). The time from the kill to the member's next
acknowledged commit, median and range over the rounds. Both sides at their defaults:
Kafka's broker.session.timeout.ms 9 s, kgc's ownership_session_timeout_ms 6 s.

Commits: one member committing three partitions synchronously, one at a time (latency), and
eight members of one group each doing so at once (commits per second): Kafka with replication
factor 3; kgc with one instance on its local file store (fsync always), and one and three
instances over the replicated store. `--not-durable` measures the commits with neither side
durable before it answers: one Kafka node (replication factor 1) against one kgc instance with
`fsync never`. A benchmark tool, not a test."""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka import KafkaAdminClient

from coordinator.partitioning import partition_for
from coordinator.settings import ServerConfig
from tests.support.admin import offsets_once_owned
from tests.support.kafka import THREE_HOSTS, KafkaCluster
from tests.support.kgc import kgc_in_front_of
from tests.support.kgc_instances import Instance, owner_of, shared_by

COMMITS = 300
PARALLEL = 8
PARTITIONS = 3
TIMEOUT_S = 120.0
KGC_SESSION_TIMEOUT_MS = ServerConfig.__dataclass_fields__["ownership_session_timeout_ms"].default


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})


def commit_once(c: Consumer, topic: str, n: int) -> None:
    c.commit(offsets=[TopicPartition(topic, p, n) for p in range(PARTITIONS)], asynchronous=False)


def warm_up(c: Consumer, topic: str) -> None:
    """A first commit, retried while the coordinator loads: found, connected, ready."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return commit_once(c, topic, 1)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def commit_latencies_ms(bootstrap: str, topic: str) -> list[float]:
    c = consumer(bootstrap, f"lat-{uuid.uuid4().hex[:8]}")
    try:
        warm_up(c, topic)
        took = []
        for n in range(2, COMMITS + 2):
            started = time.perf_counter()
            commit_once(c, topic, n)
            took.append((time.perf_counter() - started) * 1000)
        return took
    finally:
        c.close()


def commits_per_second(bootstrap: str, topic: str) -> float:
    group = f"rate-{uuid.uuid4().hex[:8]}"
    members = [consumer(bootstrap, group) for _ in range(PARALLEL)]
    for c in members:
        warm_up(c, topic)
    start = threading.Barrier(PARALLEL + 1)

    def run(c: Consumer) -> None:
        start.wait()
        for n in range(2, COMMITS // 2 + 2):
            commit_once(c, topic, n)

    threads = [threading.Thread(target=run, args=(c,)) for c in members]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    for c in members:
        c.close()
    return PARALLEL * (COMMITS // 2) / elapsed


def report_commits(name: str, bootstrap: str, topic: str) -> tuple[float, float, float]:
    took = sorted(commit_latencies_ms(bootstrap, topic))
    rate = commits_per_second(bootstrap, topic)
    p50, p99 = statistics.median(took), took[int(len(took) * 0.99) - 1]
    print(f"  {name:<34} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  {rate:7.0f} commits/s ({PARALLEL} members)",
          flush=True)
    return p50, p99, rate


def time_to_next_commit_s(bootstrap: str, topic: str, group: str, kill) -> float:
    """Commits in a loop; `kill()` once a few are acknowledged; seconds to the next one."""
    c = consumer(bootstrap, group)
    try:
        warm_up(c, topic)
        for n in range(2, 6):
            commit_once(c, topic, n)
        n, killed_at = 6, time.perf_counter()
        kill()
        while time.perf_counter() - killed_at < TIMEOUT_S:
            try:
                commit_once(c, topic, n)
                return time.perf_counter() - killed_at
            except KafkaException:
                time.sleep(0.01)
        raise SystemExit(f"no commit acknowledged within {TIMEOUT_S} s of the kill")
    finally:
        c.close()


def kafka_coordinator(bootstrap: str, group: str) -> int:
    """The broker leading the group's `__consumer_offsets` partition: its coordinator."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_topics(["__consumer_offsets"])
    finally:
        admin.close()
    partition = partition_for(group, len(described["partitions"]))
    return next(p["leader_id"] for p in described["partitions"] if p["partition_index"] == partition)


def kafka_failover_s(kafka: KafkaCluster, topic: str) -> float:
    group = f"fo-kafka-{uuid.uuid4().hex[:8]}"
    c = consumer(kafka.bootstrap, group)
    warm_up(c, topic)
    c.close()
    victim = kafka_coordinator(kafka.bootstrap, group)
    try:
        return time_to_next_commit_s(kafka.bootstrap, topic, group, lambda: kafka.kill_node(victim))
    finally:
        kafka.start_node(victim)


def kgc_failover_s(kafka: KafkaCluster, topic: str, live: list[Instance], directory: Path, state: str) -> float:
    group = f"fo-kgc-{uuid.uuid4().hex[:8]}"
    bootstrap = ",".join(i.address for i in live)
    victim = owner_of(live, group)
    took = time_to_next_commit_s(bootstrap, topic, group, victim.process.kill)
    assert offsets_once_owned(bootstrap, group)[0] >= 6
    # Back to three for the next round: a new instance in the dead one's place.
    live.remove(victim)
    fresh = Instance(kafka, state, str(directory / f"kgc-{uuid.uuid4().hex[:6]}.log"), replicas=3,
                     session_timeout_ms=KGC_SESSION_TIMEOUT_MS)
    fresh.process.start(timeout_s=60)
    live.append(fresh)
    wait_shared(live)
    return took


def wait_shared(live: list[Instance]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not shared_by(live):
        if time.monotonic() > deadline:
            raise SystemExit("the instances did not share the partitions in time")
        time.sleep(0.2)


def summary(name: str, values: list[float]) -> float:
    median = statistics.median(values)
    print(f"  {name:<34} median {median:5.1f} s  range {min(values):.1f}-{max(values):.1f} s  ({len(values)} kills)",
          flush=True)
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits-only", action="store_true", help="the commit rows, no failover")
    parser.add_argument("--not-durable", action="store_true",
                        help="one Kafka node (RF 1) against kgc with fsync never; commits only")
    args = parser.parse_args()
    if args.not_durable:
        return not_durable_commits(args.rounds)
    with tempfile.TemporaryDirectory(prefix="kgc-failover-") as tmp, \
            KafkaCluster(Path(tmp) / "kafka", THREE_HOSTS, few_threads=False) as kafka:
        directory = Path(tmp)
        topic = kafka.create_topic(f"bench-{uuid.uuid4().hex[:6]}", PARTITIONS)
        state = f"kgc-state-{uuid.uuid4().hex[:6]}"
        print(f"commits ({PARTITIONS} partitions each, {COMMITS} in a row):", flush=True)
        report_commits("Kafka 4.4, RF 3 (warm-up)", kafka.bootstrap, topic)     # its JIT's first pass
        report_commits("Kafka 4.4, RF 3", kafka.bootstrap, topic)
        with kgc_in_front_of(kafka, "--data-dir", str(directory / "local"), "--fsync", "always",
                             log_path=str(directory / "local.log")) as local:
            report_commits("kgc, 1 instance, file store", local.bootstrap, topic)
        with contextlib.ExitStack() as stack:
            live: list[Instance] = []
            for i in range(3):
                instance = Instance(kafka, state, str(directory / f"kgc-{i}.log"), replicas=3,
                                    session_timeout_ms=KGC_SESSION_TIMEOUT_MS)
                instance.process.start(timeout_s=60)
                stack.callback(lambda i=instance: i.process.stop())
                live.append(instance)
                wait_shared(live)
                if i == 0:
                    report_commits("kgc, 1 instance, replicated", instance.address, topic)
            report_commits("kgc, 3 instances, replicated", ",".join(i.address for i in live), topic)
            if args.commits_only:
                return
            print("failover (SIGKILL of the group's coordinator to the next acknowledged commit):", flush=True)
            kafka_s = summary("Kafka 4.4 (its coordinator broker)", [kafka_failover_s(kafka, topic)
                                                                      for _ in range(args.rounds)])
            kgc_s = []
            for _ in range(args.rounds):
                kgc_s.append(kgc_failover_s(kafka, topic, live, directory, state))
                stack.callback(lambda i=live[-1]: i.process.stop())
            kgc_median = summary("kgc (the group's owner instance)", kgc_s)
            print(f"  kgc / Kafka: {kgc_median / kafka_s:.2f}", flush=True)


def not_durable_commits(rounds: int) -> None:
    """Kafka and kgc in turn, `rounds` times each after one round not counted (Kafka's JIT
    compiles its commit path in its first round, kgc's lazy paths run once); medians last."""
    with tempfile.TemporaryDirectory(prefix="kgc-commits-") as tmp, \
            KafkaCluster(Path(tmp) / "kafka", few_threads=False) as kafka:
        directory = Path(tmp)
        topic = kafka.create_topic(f"bench-{uuid.uuid4().hex[:6]}", PARTITIONS)
        print(f"commits ({PARTITIONS} partitions each, {COMMITS} in a row), neither side durable:", flush=True)
        with kgc_in_front_of(kafka, "--data-dir", str(directory / "local"), "--fsync", "never",
                             log_path=str(directory / "local.log")) as local:
            runs: dict[str, list[tuple[float, float, float]]] = {"Kafka 4.4, one node, RF 1": [],
                                                                  "kgc, 1 instance, fsync never": []}
            for round_ in range(rounds + 1):
                for (name, figures), bootstrap in zip(runs.items(), (kafka.bootstrap, local.bootstrap), strict=True):
                    measured = report_commits(name if round_ else f"{name} (warm-up)", bootstrap, topic)
                    if round_:
                        figures.append(measured)
        print("medians:", flush=True)
        (kafka_p50, _, kafka_rate), (kgc_p50, _, kgc_rate) = (
            tuple(statistics.median(f[i] for f in figures) for i in range(3)) for figures in runs.values())
        print(f"  p50 {kgc_p50:.2f} / {kafka_p50:.2f} ms = {kgc_p50 / kafka_p50:.2f}; "
              f"commits/s {kgc_rate:.0f} / {kafka_rate:.0f} = {kgc_rate / kafka_rate:.2f} (kgc / Kafka)", flush=True)


if __name__ == "__main__":
    main()
