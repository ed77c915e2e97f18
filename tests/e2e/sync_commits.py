"""Synchronous commits from unmodified consumers: three consumers of one library in one
group, each assigned 2 of the topic's 6 partitions, each committing its own partitions
with a synchronous commit in a loop (confluent-kafka `commit(offsets, asynchronous=False)`,
aiokafka `await commit(offsets)`), one commit in flight per consumer, as an application
does after each batch. At the end each consumer reads its partitions back with
`committed()` and checks it gets the last offsets it committed.

Run as a benchmark (Tansu directly, and kgc with `--fsync always` and `never` in front of
the same Tansu, alternating, in one run; the disk's own fsync is timed in the same run):

    .venv/bin/python -m tests.e2e.sync_commits --seconds 3 --rounds 3

It prints a Markdown table (docs/benchmarks/notes.md, "Synchronous commits and the fsync policy"), with the
CPU time the server (kgc, or Tansu directly) and the three clients spent per commit during
the commit loops, and the requests other than OffsetCommit kgc answered in each run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coordinator.bench.disk import FsyncProbe
from coordinator.bench.stats import Latencies
from tests.support.admin import create_topic, new_name

MEMBERS = 3
PARTITIONS_EACH = 2
ASSIGN_TIMEOUT_S = 60
LIBRARIES = ("confluent-kafka", "aiokafka")


@dataclass
class Run:
    commits: int
    seconds: float
    latencies: Latencies
    server_cpu_s: float             # the server process's CPU time during the commit loops
    client_cpu_s: float             # this process's (the three clients')

    @property
    def rate(self) -> float:
        return self.commits / self.seconds


class _Gate:
    """Every member waits here until all hold their 2 partitions, then they commit together."""

    def __init__(self, members: int, server_pid: int):
        self._lock = threading.Lock()
        self._assigned: dict[int, frozenset[int]] = {}
        self.members = members
        self.server_pid = server_pid
        # Each time all members pass (the loops start, the loops and checks are done):
        # (server CPU s, this process's CPU s).
        self.cpu_marks: list[tuple[float, float]] = []
        self.barrier = threading.Barrier(members, action=self._mark_cpu, timeout=ASSIGN_TIMEOUT_S)
        self.errors: list[BaseException] = []

    def _mark_cpu(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu_marks.append((process_cpu_s(self.server_pid), usage.ru_utime + usage.ru_stime))

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


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sync_commits(library: str, bootstrap: str, topic: str, seconds: float, server_pid: int) -> Run:
    """Three members of `library` in a fresh group on `topic`, committing for `seconds`;
    `server_pid` is the process they talk to, whose CPU time is taken."""
    gate = _Gate(MEMBERS, server_pid)
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
    (server_start, client_start), (server_end, client_end) = gate.cpu_marks
    return Run(sum(counts), seconds, latencies, server_end - server_start, client_end - client_start)


FSYNC_SECONDS = "fsync seconds"
FSYNCS = "fsyncs"


def kgc_counts(metrics_url: str) -> Counter:
    """From kgc's metrics: `kgc_requests_total` by API name (all versions together), and
    the sum and count of its fsyncs under FSYNC_SECONDS and FSYNCS."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    counts: Counter = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kgc_requests_total":
                counts[sample.labels["api"]] += int(sample.value)
            elif sample.name == "kgc_log_fsync_duration_seconds_sum":
                counts[FSYNC_SECONDS] += sample.value
            elif sample.name == "kgc_log_fsync_duration_seconds_count":
                counts[FSYNCS] += int(sample.value)
    return counts


def main(argv: list[str] | None = None) -> None:
    from tests.support.kgc import free_port, kgc_process, wait_listening
    from tests.support.tansu import TansuBroker

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="commit loop per run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over every path (default %(default)s)")
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    args = parser.parse_args(argv)
    libraries = [name for name in args.libraries.split(",") if name]

    paths = ("Tansu direct", "kgc fsync=always", "kgc fsync=never")
    results: dict[tuple[str, str], list[Run]] = {(lib, p): [] for lib in libraries for p in paths}
    kgc_during: dict[tuple[str, str], Counter] = {(lib, p): Counter() for lib in libraries for p in paths}
    disk_p50s, disk_p99s, together_p50s = [], [], []
    with TansuBroker() as tansu, tempfile.TemporaryDirectory(prefix="kgc-sync-") as tmp, \
            FsyncProbe(Path(tmp)) as probe:
        bootstraps = {"Tansu direct": tansu.bootstrap}
        servers = {"Tansu direct": (tansu.pid, None)}
        with _kgc_in_front(tansu, Path(tmp) / "always", "always", free_port, kgc_process) as always, \
                _kgc_in_front(tansu, Path(tmp) / "never", "never", free_port, kgc_process) as never:
            wait_listening(always.broker_port)
            wait_listening(never.broker_port)
            bootstraps["kgc fsync=always"] = always.bootstrap
            bootstraps["kgc fsync=never"] = never.bootstrap
            servers["kgc fsync=always"] = (always.pid, always.metrics_url)
            servers["kgc fsync=never"] = (never.pid, never.metrics_url)
            topic = create_topic(tansu.bootstrap, MEMBERS * PARTITIONS_EACH)
            for _ in range(args.rounds):
                for lib in libraries:
                    for path in paths:
                        if path == "kgc fsync=always":
                            disk = probe.latencies()
                            disk_p50s.append(disk.percentile_ms(50))
                            disk_p99s.append(disk.percentile_ms(99))
                            together_p50s.append(probe.latencies(writers=MEMBERS).percentile_ms(50))
                        pid, metrics_url = servers[path]
                        before = kgc_counts(metrics_url) if metrics_url else Counter()
                        results[lib, path].append(sync_commits(lib, bootstraps[path], topic, args.seconds, pid))
                        if metrics_url:
                            kgc_during[lib, path] += kgc_counts(metrics_url) - before

    print(f"{MEMBERS} consumers x {PARTITIONS_EACH} partitions in one group, one synchronous commit in flight "
          f"each, {args.seconds:g} s per run, {args.rounds} round(s); medians over rounds\n")
    print("| library | path | commits/s | p50 ms | p99 ms | commits/s vs Tansu | server CPU µs/commit "
          "| clients' CPU µs/commit |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    p50 = {}
    for lib in libraries:
        direct = statistics.median(r.rate for r in results[lib, "Tansu direct"])
        for path in paths:
            runs = results[lib, path]
            rate = statistics.median(r.rate for r in runs)
            p50[lib, path] = statistics.median(r.latencies.percentile_ms(50) for r in runs)
            p99 = statistics.median(r.latencies.percentile_ms(99) for r in runs)
            server_cpu = statistics.median(r.server_cpu_s / r.commits * 1e6 for r in runs)
            client_cpu = statistics.median(r.client_cpu_s / r.commits * 1e6 for r in runs)
            print(f"| {lib} | {path} | {rate:,.0f} | {p50[lib, path]:.3f} | {p99:.3f} | {rate / direct:.2f} "
                  f"| {server_cpu:.0f} | {client_cpu:.0f} |")
    disk_p50 = statistics.median(disk_p50s)
    together_p50 = statistics.median(together_p50s)
    print(f"\ndisk fsync of a small append, timed just before each fsync=always run: p50 {disk_p50:.3f} ms, "
          f"p99 {statistics.median(disk_p99s):.3f} ms (medians of {len(disk_p50s)}); "
          f"with {MEMBERS} writers appending to one file at once, as the {MEMBERS} consumers' commits "
          f"to their group's partition do: p50 {together_p50:.3f} ms")
    for lib in libraries:
        extra = p50[lib, "kgc fsync=always"] - p50[lib, "kgc fsync=never"]
        during = kgc_during[lib, "kgc fsync=always"]
        own = during[FSYNC_SECONDS] / during[FSYNCS] * 1000 if during[FSYNCS] else float("nan")
        print(f"- {lib}: p50 always - p50 never = {extra:.3f} ms = {extra / disk_p50:.2f} x disk fsync p50 "
              f"= {extra / together_p50:.2f} x disk fsync p50 with {MEMBERS} writers "
              f"= {extra / own:.2f} x kgc's mean fsync in its always runs ({own:.3f} ms)")
    print("\nrequests kgc answered besides OffsetCommit, whole runs (group join and leave included):")
    for (lib, path), counts in kgc_during.items():
        if path != "Tansu direct":
            others = ", ".join(f"{api} {n}" for api, n in sorted(counts.items())
                               if api not in ("OffsetCommit", FSYNC_SECONDS, FSYNCS))
            print(f"- {lib}, {path}: {others}")


class _kgc_in_front:
    """kgc with `--fsync <policy>` on its own data dir, in front of `tansu`."""

    def __init__(self, tansu, data_dir: Path, fsync: str, free_port, kgc_process):
        self.broker_port = free_port()
        http_port = free_port()
        self.metrics_url = f"http://127.0.0.1:{http_port}/metrics"
        self._cm = kgc_process("--upstream", tansu.bootstrap, "--broker-port", f"{tansu.node_id}={self.broker_port}",
                               "--http-port", str(http_port), "--data-dir", str(data_dir), "--fsync", fsync,
                               "--initial-rebalance-delay-ms", "0")

    def __enter__(self):
        kgc = self._cm.__enter__()
        self.bootstrap = kgc.bootstrap
        self.pid = kgc.proc.pid
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


if __name__ == "__main__":
    main()
