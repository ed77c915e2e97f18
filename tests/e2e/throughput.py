"""Moving bulk data through kgc: an idempotent acks=all producer and a consumer, both
librdkafka (confluent-kafka), checked record by record, and timed.

Every value starts with `<partition>:<sequence>:` and is padded to the record size; the
consumer checks that each partition's sequence goes 0, 1, 2, ... with nothing missing,
repeated or out of order.

Run as a benchmark (the same workload direct to the broker and through kgc in front of it,
in one run), against Apache Kafka started from the cached jars, or Tansu:

    .venv/bin/python -m tests.e2e.throughput --mb 100 --upstream kafka
    .venv/bin/python -m tests.e2e.throughput --mb 100 --upstream tansu

It prints the Markdown table recorded in BENCHMARKS.md ("Data path").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.admin import create_topic
from tests.support.kafka import KafkaCluster
from tests.support.kgc import KgcProcess, free_port, kgc_in_front_of, kgc_process, wait_listening
from tests.support.tansu import TansuBroker

PARTITIONS = 4
RECORD_BYTES = 1024
DEADLINE_S = 300


@dataclass(frozen=True, slots=True)
class Transfer:
    records: int
    payload_bytes: int
    produce_s: float
    fetch_s: float
    produce_cpu_s: float | None = None    # CPU the kgc process spent in each phase
    fetch_cpu_s: float | None = None

    @property
    def produce_mb_s(self) -> float:
        return self.payload_bytes / 2**20 / self.produce_s

    @property
    def fetch_mb_s(self) -> float:
        return self.payload_bytes / 2**20 / self.fetch_s


def records_for(megabytes: float, record_bytes: int = RECORD_BYTES) -> int:
    return int(megabytes * 2**20) // record_bytes


def value(partition: int, seq: int, record_bytes: int) -> bytes:
    head = b"%d:%d:" % (partition, seq)
    return head + b"x" * (record_bytes - len(head))


def produce(bootstrap: str, topic: str, records: int, *, record_bytes: int = RECORD_BYTES) -> float:
    """`records` records round-robin over the partitions; seconds until all are acknowledged."""
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 256 * 1024})
    start = time.monotonic()
    for n in range(records):
        partition, seq = n % PARTITIONS, n // PARTITIONS
        while True:
            try:
                producer.produce(topic, value=value(partition, seq, record_bytes), partition=partition,
                                 on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
                if time.monotonic() - start > DEADLINE_S:
                    raise TimeoutError(f"producer queue still full after {DEADLINE_S}s") from None
        producer.poll(0)
    remaining = producer.flush(DEADLINE_S)
    elapsed = time.monotonic() - start
    assert remaining == 0, f"{remaining} records unacknowledged after {DEADLINE_S}s"
    assert not failures, failures[:5]
    return elapsed


class SequenceCheck:
    """What a consumer received, checked record by record: right partition, each
    partition's sequence exactly 0, 1, 2, ... (no loss, no duplicate, order kept)."""

    def __init__(self, records: int, record_bytes: int = RECORD_BYTES):
        self.records = records
        self.record_bytes = record_bytes
        self.next_seq = [0] * PARTITIONS
        self.received = 0

    @property
    def complete(self) -> bool:
        return self.received >= self.records

    def take(self, p: int, value: bytes) -> None:
        partition, seq, _ = value.split(b":", 2)
        assert int(partition) == p and int(seq) == self.next_seq[p], (p, self.next_seq[p], value[:32])
        assert len(value) == self.record_bytes
        self.next_seq[p] += 1
        self.received += 1

    def check_deadline(self, start: float) -> None:
        if time.monotonic() - start > DEADLINE_S:
            raise TimeoutError(f"{self.received} of {self.records} records after {DEADLINE_S}s: {self.next_seq}")


def consume_verified(bootstrap: str, topic: str, records: int, *, record_bytes: int = RECORD_BYTES) -> float:
    """Fetch every partition from offset 0 until `records` arrived, checked by
    `SequenceCheck`. Returns the seconds it took."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 * 2**20,
                         "max.partition.fetch.bytes": 10 * 2**20, "queued.max.messages.kbytes": 256 * 1024})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    check = SequenceCheck(records, record_bytes)
    start = time.monotonic()
    try:
        while not check.complete:
            check.check_deadline(start)
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                assert m.error() is None, m.error()
                check.take(m.partition(), m.value())
        return time.monotonic() - start
    finally:
        consumer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def transfer(bootstrap: str, megabytes: float, *, record_bytes: int = RECORD_BYTES,
             proxy_pid: int | None = None) -> Transfer:
    """Produce then fetch `megabytes`; with `proxy_pid`, also the CPU that process spent."""
    def cpu() -> float:
        return cpu_seconds(proxy_pid) if proxy_pid is not None else 0.0

    records = records_for(megabytes, record_bytes)
    topic = create_topic(bootstrap, PARTITIONS)
    started = cpu()
    produce_s = produce(bootstrap, topic, records, record_bytes=record_bytes)
    produced = cpu()
    fetch_s = consume_verified(bootstrap, topic, records, record_bytes=record_bytes)
    fetched = cpu()
    if proxy_pid is None:
        return Transfer(records, records * record_bytes, produce_s, fetch_s)
    return Transfer(records, records * record_bytes, produce_s, fetch_s, produced - started, fetched - produced)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=100.0, help="payload per run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=1, help="direct/kgc pairs, alternated (default %(default)s)")
    parser.add_argument("--upstream", choices=("kafka", "tansu"), default="kafka",
                        help="the broker, one node (default %(default)s)")
    args = parser.parse_args(argv)

    direct_path = f"direct to {'Kafka' if args.upstream == 'kafka' else 'Tansu'}"
    results: dict[str, list[Transfer]] = {direct_path: [], "through kgc": []}
    with _upstream_and_kgc(args.upstream) as (direct, kgc):
        for _ in range(args.rounds):
            results[direct_path].append(transfer(direct, args.mb))
            results["through kgc"].append(transfer(kgc.bootstrap, args.mb, proxy_pid=kgc.proc.pid))

    print(f"{args.mb:g} MB per run ({records_for(args.mb)} x {RECORD_BYTES} B, {PARTITIONS} partitions), "
          f"{args.rounds} round(s) alternating the paths; {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs\n")
    print("| path | produce MB/s (median / best) | fetch MB/s (median / best) |")
    print("|---|---:|---:|")
    medians = {}
    for path, runs in results.items():
        produce_rates, fetch_rates = [t.produce_mb_s for t in runs], [t.fetch_mb_s for t in runs]
        medians[path] = statistics.median(produce_rates), statistics.median(fetch_rates)
        print(f"| {path} | {medians[path][0]:.1f} / {max(produce_rates):.1f} "
              f"| {medians[path][1]:.1f} / {max(fetch_rates):.1f} |")
    direct, via = medians[direct_path], medians["through kgc"]
    print(f"| kgc / direct (medians) | {via[0] / direct[0]:.2f} | {via[1] / direct[1]:.2f} |")
    runs = results["through kgc"]
    print(f"\nkgc's own CPU per MB moved (median): produce "
          f"{statistics.median(t.produce_cpu_s / args.mb for t in runs) * 1000:.1f} ms, fetch "
          f"{statistics.median(t.fetch_cpu_s / args.mb for t in runs) * 1000:.1f} ms")

@contextlib.contextmanager
def _upstream_and_kgc(upstream: str) -> Iterator[tuple[str, KgcProcess]]:
    """The broker's bootstrap, and kgc in front of it."""
    if upstream == "kafka":
        with tempfile.TemporaryDirectory(prefix="kgc-throughput-") as tmp, \
                KafkaCluster(Path(tmp) / "kafka", few_threads=False) as kafka, \
                kgc_in_front_of(kafka, "--data-dir", f"{tmp}/kgc-data", "--log-level", "WARNING") as kgc:
            yield kafka.bootstrap, kgc
        return
    with TansuBroker() as tansu:
        broker_port = free_port()
        with kgc_process("--upstream", tansu.bootstrap, "--broker-port", f"{tansu.node_id}={broker_port}") as kgc:
            wait_listening(broker_port)
            yield tansu.bootstrap, kgc


if __name__ == "__main__":
    main()
