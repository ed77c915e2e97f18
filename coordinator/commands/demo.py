"""`kgc demo`: the whole path on one machine, told as it happens.

Starts the embedded upstream (Tansu, extra `embedded`) and kgc in front of it, creates a
topic, produces through kgc, runs a 3-consumer group through kgc, closes one consumer,
shows the rebalance and the committed offsets, asks the upstream broker directly whether it
knows the group (it must not: kgc coordinates it), and prints a short report. Exit status 0
means every check held: each record consumed exactly once, committed offsets at the end of
the log, the group in kgc only.

The clients are kafka-python's (a dependency of kgc), each consumer on its own thread as an
application would run it; kgc runs in this process on the event loop, untouched by them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from coordinator.embedded import EmbeddedBroker, EmbeddedUnavailable, free_port
from coordinator.group.config import GroupConfig
from coordinator.probe import request_response
from coordinator.settings import ServerConfig

log = logging.getLogger(__name__)

TOPIC = "kgc-demo"
GROUP = "kgc-demo-group"
CONSUMERS = 3
WAIT_S = 60
POLL_MS = 100
CLIENT_TIMEOUT_MS = 10_000


def add_demo_parser(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run kgc with an embedded Kafka-compatible broker and show a "
                                           "consumer group at work")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the demo topic (default %(default)s)")
    p.add_argument("--records", type=int, default=600, help="records per round (default %(default)s)")
    p.add_argument("--log-level", default="WARNING", help="kgc's own log level (default %(default)s)")
    p.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    try:
        broker = EmbeddedBroker().start()
    except EmbeddedUnavailable as exc:
        print(f"kgc demo needs the embedded broker: {exc}")
        return 2
    try:
        say(f"upstream: Tansu broker (pid {broker.pid}) on {broker.bootstrap}, memory storage")
        return asyncio.run(_demo(broker, args.partitions, args.records))
    finally:
        broker.close()


def say(text: str) -> None:
    print(text, flush=True)


async def _demo(broker: EmbeddedBroker, partitions: int, records: int) -> int:
    from coordinator.app import KgcApp, started

    if broker.node_id is None:
        raise RuntimeError("the embedded broker has not started: its node id is unknown")
    config = ServerConfig(
        host="127.0.0.1", port=free_port(), upstream=(broker.address,),
        broker_ports=((broker.node_id, free_port()),),
        # Members that start together form one generation; clean leaves are answered at once.
        group=GroupConfig(initial_rebalance_delay_ms=300))
    app = KgcApp(config)
    await app.start()
    try:
        await asyncio.wait_for(started(app.cluster, "the upstream cluster").wait_reachable(), WAIT_S)
        say(f"kgc: serving on 127.0.0.1:{app.port}; clients bootstrap here, never at the upstream")
        story = Story(f"127.0.0.1:{app.port}", broker, partitions, records)
        return await asyncio.to_thread(story.run)
    finally:
        await app.stop()


@dataclass
class DemoConsumer:
    """A kafka-python consumer in the group, polling on its own thread and committing what it
    consumed after each poll."""

    name: str
    bootstrap: str
    assignment: frozenset[int] = frozenset()
    error: BaseException | None = None
    _consumed: Counter = field(default_factory=Counter)   # partition -> records

    def __post_init__(self):
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, group_id=GROUP, client_id=self.name,
                                     enable_auto_commit=False, auto_offset_reset="earliest",
                                     heartbeat_interval_ms=200, metadata_max_age_ms=1000)
        except BaseException as exc:
            self.error = exc
            return
        try:
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=POLL_MS)
                with self._lock:
                    for tp, batch in batches.items():
                        self._consumed[tp.partition] += len(batch)
                if batches:
                    consumer.commit()
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        except BaseException as exc:
            self.error = exc
        finally:
            consumer.close(autocommit=False)  # a dynamic member leaves the group here

    @property
    def consumed(self) -> Counter:
        with self._lock:
            return Counter(self._consumed)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)


class DemoFailed(Exception):
    pass


class Story:
    def __init__(self, bootstrap: str, broker: EmbeddedBroker, partitions: int, records: int):
        self.bootstrap = bootstrap
        self.broker = broker
        self.partitions = partitions
        self.records = records
        self.produced: Counter = Counter()
        self.acked_end: dict[int, int] = {}   # partition -> last acknowledged offset + 1
        self.report: list[str] = []

    def run(self) -> int:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="kgc-demo-admin",
                                 request_timeout_ms=CLIENT_TIMEOUT_MS)
        consumers: list[DemoConsumer] = []
        try:
            self._tell(admin, consumers)
        except DemoFailed as exc:
            say(f"\nFAILED: {exc}")
            return 1
        finally:
            for c in consumers:
                c.close()
            admin.close()
        say("\nReport")
        for line in self.report:
            say(f"  - {line}")
        return 0

    def _tell(self, admin: KafkaAdminClient, consumers: list[DemoConsumer]) -> None:
        admin.create_topics({TOPIC: {"num_partitions": self.partitions, "replication_factor": 1}},
                            timeout_ms=CLIENT_TIMEOUT_MS, wait_for_metadata=True)
        say(f"\n1. created topic {TOPIC!r} with {self.partitions} partitions (through kgc, forwarded upstream)")
        self._produce()
        say(f"2. produced {self.records} records (acks=all, through kgc)")

        consumers += [DemoConsumer(f"consumer-{i + 1}", self.bootstrap) for i in range(CONSUMERS)]
        formed_s = self._wait_owned(consumers)
        say(f"3. {CONSUMERS} consumers joined group {GROUP!r} in {formed_s:.2f} s; kgc's view:")
        self._show_group(admin)
        self._wait_consumed(consumers)
        say("   " + ", ".join(f"{c.name} consumed {c.consumed.total()}" for c in consumers))

        leaving = consumers.pop()
        started = time.monotonic()
        leaving.close()
        rebalance_s = self._wait_owned(consumers)
        say(f"4. {leaving.name} stopped (LeaveGroup); the other {len(consumers)} took over its partitions "
            f"in {rebalance_s * 1000:.0f} ms (close included: {(time.monotonic() - started) * 1000:.0f} ms)")
        self._show_group(admin)

        self._produce()
        say(f"5. produced {self.records} more records; the remaining consumers read them")
        consumers.append(leaving)  # its records count towards the totals
        self._wait_consumed(consumers)

        # The last commit follows the last poll: wait for it rather than race it.
        ends = self.acked_end
        committed: dict[int, int] = {}

        def caught_up() -> bool:
            committed.update(self._committed(admin))
            return committed == ends
        self._wait(caught_up, lambda: f"committed {committed}, end {ends}", consumers)
        say("6. committed offsets (kept by kgc) against the end of each partition (acknowledged by upstream):")
        for p in range(self.partitions):
            say(f"   partition {p}: committed {committed[p]}  end {ends[p]}")

        state, members = self._upstream_view()
        say(f"7. asked the upstream broker directly about {GROUP!r}: state {state}, {members} members "
            "(kgc coordinates the group; the upstream never saw it)")
        if members:
            raise DemoFailed(f"the upstream broker knows {members} members of {GROUP!r}")

        consumed = sum((c.consumed for c in consumers), Counter())
        self.report += [
            f"{self.produced.total()} records produced, {consumed.total()} consumed, "
            f"each partition exactly as many as produced: {consumed == self.produced}",
            f"group formed with {CONSUMERS} members in {formed_s:.2f} s; after one left, "
            f"the rest owned every partition again in {rebalance_s * 1000:.0f} ms",
            "committed offsets equal the end of every partition",
            "the upstream broker holds no state for the group: kgc is its coordinator",
        ]
        if consumed != self.produced:
            raise DemoFailed(f"consumed {dict(consumed)} but produced {dict(self.produced)}")

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", client_id="kgc-demo-producer")
        try:
            sent = [producer.send(TOPIC, value=b"record %d" % n, partition=n % self.partitions)
                    for n in range(self.records)]
            producer.flush(timeout=WAIT_S)
            for future in sent:
                acked = future.get(timeout=WAIT_S)
                self.produced[acked.partition] += 1
                self.acked_end[acked.partition] = max(self.acked_end.get(acked.partition, 0), acked.offset + 1)
        finally:
            producer.close()

    def _wait_owned(self, consumers: list[DemoConsumer]) -> float:
        def owned() -> bool:
            parts = [p for c in consumers for p in c.assignment]
            return all(c.assignment for c in consumers) and sorted(parts) == list(range(self.partitions))
        return self._wait(owned, lambda: {c.name: sorted(c.assignment) for c in consumers}, consumers)

    def _wait_consumed(self, consumers: list[DemoConsumer]) -> None:
        def total() -> int:
            return sum(c.consumed.total() for c in consumers)
        self._wait(lambda: total() >= self.produced.total(), lambda: f"{total()} consumed", consumers)

    @staticmethod
    def _wait(condition, describe, consumers: list[DemoConsumer]) -> float:
        start = time.monotonic()
        while time.monotonic() - start < WAIT_S:
            for c in consumers:
                if c.error is not None:
                    raise DemoFailed(f"{c.name} failed: {c.error!r}")
            if condition():
                return time.monotonic() - start
            time.sleep(0.01)
        raise DemoFailed(f"gave up after {WAIT_S} s: {describe()}")

    def _show_group(self, admin: KafkaAdminClient) -> None:
        description = admin.describe_groups([GROUP])[GROUP]
        say(f"   state {description['group_state']}, protocol {description['protocol_data']}")
        for m in sorted(description["members"], key=lambda m: m["client_id"]):
            parts = sorted(p for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"])
            say(f"   {m['client_id']}: partitions {parts}")

    def _committed(self, admin: KafkaAdminClient) -> dict[int, int]:
        offsets = admin.list_group_offsets({GROUP: None})[GROUP]
        return {tp.partition: meta.offset for tp, meta in offsets.items()}

    def _upstream_view(self) -> tuple[str, int]:
        response = request_response(self.broker.address, DescribeGroupsRequest[5](
            groups=[GROUP], include_authorized_operations=False), DescribeGroupsResponse)
        [group] = response.groups
        return group.group_state, len(group.members)
