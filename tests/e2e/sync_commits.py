"""Synchronous commits from unmodified consumers: three consumers of one library in one
group, each assigned 2 of the topic's 6 partitions, each committing its own partitions
with a synchronous commit in a loop (confluent-kafka `commit(offsets, asynchronous=False)`,
aiokafka `await commit(offsets)`), one commit in flight per consumer, as an application
does after each batch. At the end each consumer reads its partitions back with
`committed()` and checks it gets the last offsets it committed.

Run as a benchmark (Tansu directly, and kgc with `--fsync always` and `never` in front of
the same Tansu, alternating, in one run; the disk's own fsync is timed in the same run):

    .venv/bin/python -m tests.e2e.sync_commits --seconds 3 --rounds 3

It prints the Markdown table recorded in BENCHMARKS.md ("Synchronous commits").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coordinator.bench.disk import FsyncProbe
from coordinator.bench.stats import Latencies
from tests.e2e.admin import create_topic, new_name

MEMBERS = 3
PARTITIONS_EACH = 2
ASSIGN_TIMEOUT_S = 60
LIBRARIES = ("confluent-kafka", "aiokafka")


@dataclass
class Run:
    commits: int
    seconds: float
    latencies: Latencies

    @property
    def rate(self) -> float:
        return self.commits / self.seconds


class _Gate:
    """Every member waits here until all hold their 2 partitions, then they commit together."""

    def __init__(self, members: int):
        self._lock = threading.Lock()
        self._assigned: dict[int, frozenset[int]] = {}
        self.members = members
        self.barrier = threading.Barrier(members, timeout=ASSIGN_TIMEOUT_S)
        self.errors: list[BaseException] = []

    def report(self, member: int, assigned: frozenset[int]) -> bool:
        """Whether the whole group is settled: everyone holds 2, all distinct."""
        with self._lock:
            self._assigned[member] = assigned
            held = list(self._assigned.values())
            return (len(held) == self.members and all(len(a) == PARTITIONS_EACH for a in held)
                    and len(frozenset().union(*held)) == self.members * PARTITIONS_EACH)


def _confluent_member(bootstrap: str, group: str, topic: str, member: int, gate: _Gate, seconds: float,
                      latencies: Latencies, counts: list[int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"sync-{member}",
                         "enable.auto.commit": False, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 500, "partition.assignment.strategy": "roundrobin"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + ASSIGN_TIMEOUT_S
        while not gate.report(member, frozenset(tp.partition for tp in consumer.assignment())):
            if time.monotonic() > deadline:
                raise TimeoutError(f"member {member}: group not settled after {ASSIGN_TIMEOUT_S}s")
            consumer.poll(0.05)
        gate.barrier.wait()
        mine = sorted(tp.partition for tp in consumer.assignment())
        offset = 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            offset += 1
            started = time.perf_counter_ns()
            consumer.commit(offsets=[TopicPartition(topic, p, offset) for p in mine], asynchronous=False)
            latencies.add(time.perf_counter_ns() - started)
            counts[member] += 1
        got = {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in mine],
                                                                     timeout=10)}
        assert got == dict.fromkeys(mine, offset), (member, got, offset)
        gate.barrier.wait()     # nobody leaves (and rebalances the others) before all are done
    finally:
        consumer.close()


def _aiokafka_member(bootstrap: str, group: str, topic: str, member: int, gate: _Gate, seconds: float,
                     latencies: Latencies, counts: list[int]) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    client_id=f"sync-{member}", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=500)
        await consumer.start()
        try:
            deadline = time.monotonic() + ASSIGN_TIMEOUT_S
            while not gate.report(member, frozenset(tp.partition for tp in consumer.assignment())):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"member {member}: group not settled after {ASSIGN_TIMEOUT_S}s")
                await consumer.getmany(timeout_ms=50)
            await asyncio.to_thread(gate.barrier.wait)
            mine = sorted(tp.partition for tp in consumer.assignment())
            offset = 0
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                offset += 1
                started = time.perf_counter_ns()
                await consumer.commit({TopicPartition(topic, p): offset for p in mine})
                latencies.add(time.perf_counter_ns() - started)
                counts[member] += 1
            got = {p: await consumer.committed(TopicPartition(topic, p)) for p in mine}
            assert got == dict.fromkeys(mine, offset), (member, got, offset)
            await asyncio.to_thread(gate.barrier.wait)
        finally:
            await consumer.stop()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


MEMBER: dict[str, Callable[..., None]] = {"confluent-kafka": _confluent_member, "aiokafka": _aiokafka_member}


def sync_commits(library: str, bootstrap: str, topic: str, seconds: float) -> Run:
    """Three members of `library` in a fresh group on `topic`, committing for `seconds`."""
    gate = _Gate(MEMBERS)
    latencies = Latencies()
    counts = [0] * MEMBERS
    group = new_name(f"sync-{library}")

    def member(i: int) -> None:
        try:
            MEMBER[library](bootstrap, group, topic, i, gate, seconds, latencies, counts)
        except BaseException as exc:
            gate.errors.append(exc)
            gate.barrier.abort()

    threads = [threading.Thread(target=member, args=(i,), name=f"sync-{library}-{i}") for i in range(MEMBERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ASSIGN_TIMEOUT_S + seconds + 30)
    if gate.errors:
        raise gate.errors[0]
    if any(t.is_alive() for t in threads):
        raise TimeoutError(f"{library} members still running")
    return Run(sum(counts), seconds, latencies)


def main(argv: list[str] | None = None) -> None:
    from tests.e2e.conftest import wait_listening
    from tests.support.kgc import free_port, kgc_process
    from tests.support.tansu import TansuBroker

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="commit loop per run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over every path (default %(default)s)")
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    args = parser.parse_args(argv)
    libraries = [name for name in args.libraries.split(",") if name]

    paths = ("Tansu direct", "kgc fsync=always", "kgc fsync=never")
    results: dict[tuple[str, str], list[Run]] = {(lib, p): [] for lib in libraries for p in paths}
    disk_p50s, disk_p99s = [], []
    with TansuBroker() as tansu, tempfile.TemporaryDirectory(prefix="kgc-sync-") as tmp, \
            FsyncProbe(Path(tmp)) as probe:
        bootstraps = {"Tansu direct": tansu.bootstrap}
        with _kgc_in_front(tansu, Path(tmp) / "always", "always", free_port, kgc_process) as always, \
                _kgc_in_front(tansu, Path(tmp) / "never", "never", free_port, kgc_process) as never:
            wait_listening(always.broker_port)
            wait_listening(never.broker_port)
            bootstraps["kgc fsync=always"] = always.bootstrap
            bootstraps["kgc fsync=never"] = never.bootstrap
            topic = create_topic(tansu.bootstrap, MEMBERS * PARTITIONS_EACH)
            for _ in range(args.rounds):
                for lib in libraries:
                    for path in paths:
                        if path == "kgc fsync=always":
                            disk = probe.latencies()
                            disk_p50s.append(disk.percentile_ms(50))
                            disk_p99s.append(disk.percentile_ms(99))
                        results[lib, path].append(sync_commits(lib, bootstraps[path], topic, args.seconds))

    print(f"{MEMBERS} consumers x {PARTITIONS_EACH} partitions in one group, one synchronous commit in flight "
          f"each, {args.seconds:g} s per run, {args.rounds} round(s); medians over rounds\n")
    print("| library | path | commits/s | p50 ms | p99 ms | commits/s vs Tansu |")
    print("|---|---|---:|---:|---:|---:|")
    p50 = {}
    for lib in libraries:
        direct = statistics.median(r.rate for r in results[lib, "Tansu direct"])
        for path in paths:
            runs = results[lib, path]
            rate = statistics.median(r.rate for r in runs)
            p50[lib, path] = statistics.median(r.latencies.percentile_ms(50) for r in runs)
            p99 = statistics.median(r.latencies.percentile_ms(99) for r in runs)
            print(f"| {lib} | {path} | {rate:,.0f} | {p50[lib, path]:.3f} | {p99:.3f} | {rate / direct:.2f} |")
    disk_p50 = statistics.median(disk_p50s)
    print(f"\ndisk fsync of a small append, timed just before each fsync=always run: p50 {disk_p50:.3f} ms, "
          f"p99 {statistics.median(disk_p99s):.3f} ms (medians of {len(disk_p50s)})")
    for lib in libraries:
        extra = p50[lib, "kgc fsync=always"] - p50[lib, "kgc fsync=never"]
        print(f"- {lib}: p50 always - p50 never = {extra:.3f} ms = {extra / disk_p50:.2f} x disk fsync p50")


class _kgc_in_front:
    """kgc with `--fsync <policy>` on its own data dir, in front of `tansu`."""

    def __init__(self, tansu, data_dir: Path, fsync: str, free_port, kgc_process):
        self.broker_port = free_port()
        self._cm = kgc_process("--upstream", tansu.bootstrap, "--broker-port", f"{tansu.node_id}={self.broker_port}",
                               "--data-dir", str(data_dir), "--fsync", fsync, "--initial-rebalance-delay-ms", "0")

    def __enter__(self):
        kgc = self._cm.__enter__()
        self.bootstrap = kgc.bootstrap
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


if __name__ == "__main__":
    main()
