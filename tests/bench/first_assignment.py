"""How long an unmodified member (librdkafka through confluent-kafka, and the Java client)
waits for its first assignment, classic protocol against `group.protocol=consumer` (KIP-848), through kgc and
against Kafka's own coordinator, on a topic created just before the member subscribes (the
case kgc used to answer a heartbeat interval late). One Kafka 4.4 broker and one kgc in
front of it, started here from the suite's cached jars.

    .venv/bin/python -m tests.bench.first_assignment --rounds 5

Prints the median and the range, in milliseconds, from `subscribe` to the first non-empty
assignment (for the Java client, from starting its JVM: the same start on both sides). A benchmark tool, not a test. Kafka's `group.initial.rebalance.delay.ms` is 0 on
both sides (kgc `--initial-rebalance-delay-ms 0`)."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer

from tests.support.admin import create_topic
from tests.support.clients import JAVA_CONSUMER_PROTOCOL, Member, MemberSettings
from tests.support.kafka import KafkaCluster
from tests.support.kgc import kgc_in_front_of

PARTITIONS = 4
TIMEOUT_S = 30.0


def first_assignment_ms(bootstrap: str, protocol: str) -> float:
    topic = create_topic(bootstrap, PARTITIONS)
    assigned: list[float] = []
    config = {"bootstrap.servers": bootstrap, "group.id": f"first-{uuid.uuid4().hex[:8]}",
              "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config.update({"session.timeout.ms": 10_000, "partition.assignment.strategy": "range"})
    consumer = Consumer(config)
    try:
        started = time.perf_counter()
        consumer.subscribe([topic], on_assign=lambda c, parts: parts and assigned.append(time.perf_counter()))
        while not assigned and time.perf_counter() - started < TIMEOUT_S:
            consumer.poll(0.01)
        if not assigned:
            raise SystemExit(f"{protocol}: no assignment within {TIMEOUT_S} s")
        return (assigned[0] - started) * 1000
    finally:
        consumer.close()


def java_first_assignment_ms(bootstrap: str, protocol: str) -> float:
    topic = create_topic(bootstrap, PARTITIONS)
    library = JAVA_CONSUMER_PROTOCOL if protocol == "consumer" else "java"
    member = Member(library, MemberSettings(bootstrap, f"first-{uuid.uuid4().hex[:8]}", topic, "first",
                                            session_timeout_ms=10_000))
    started = time.perf_counter()
    member.start()
    try:
        while not member.assignment and time.perf_counter() - started < TIMEOUT_S:
            if member.error is not None:
                raise member.error
            time.sleep(0.005)
        if not member.assignment:
            raise SystemExit(f"java {protocol}: no assignment within {TIMEOUT_S} s")
        return (time.perf_counter() - started) * 1000
    finally:
        member.close()


CLIENTS = {"librdkafka": first_assignment_ms, "java": java_first_assignment_ms}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", default="librdkafka,java", help="comma-separated: librdkafka, java")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        with KafkaCluster(Path(work) / "kafka", settings={"group.initial.rebalance.delay.ms": "0"},
                          few_threads=False) as kafka:
            with kgc_in_front_of(kafka, "--initial-rebalance-delay-ms", "0",
                                 log_path=str(Path(work) / "kgc.log")) as kgc:
                targets = {"kgc": kgc.bootstrap, "kafka": kafka.bootstrap}
                results: dict[tuple[str, str, str], list[float]] = {}
                for _ in range(args.rounds):
                    for client in args.clients.split(","):
                        for target, bootstrap in targets.items():
                            for protocol in ("classic", "consumer"):
                                results.setdefault((client, target, protocol), []).append(
                                    CLIENTS[client](bootstrap, protocol))
    for (client, target, protocol), values in results.items():
        print(f"{client:10s} {target:6s} {protocol:9s} median {statistics.median(values):8.1f} ms "
              f"(range {min(values):.1f}-{max(values):.1f}, {len(values)} rounds)")


if __name__ == "__main__":
    main()
