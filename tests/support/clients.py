"""Unmodified consumers of three Python-reachable client libraries behind one small interface.

Each library's consumer runs on its own thread (`Member`), polling all the time as an
application would, because none of them is thread-safe and each rebalances only while it
is polled. The test reads snapshots (what was consumed, what is assigned, how often the
assignment changed) and asks the member's own thread to commit or close.

The drivers use each library's own group coordinator: librdkafka (confluent-kafka), kafka-python's
`KafkaConsumer` and aiokafka's `AIOKafkaConsumer`, subscribed to a topic, manual commits, and
for each library (and the Java client) a driver that commits asynchronously, which fails the
member on a failed commit and lets none be in flight when it closes.
Their common assignor is "roundrobin" unless `MemberSettings.assignor` names another, so a
group mixing them agrees on a protocol; every driver keeps what its rebalance listener was
told in `events`.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import importlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.java_client import JavaMemberError, JavaProcess, java_properties
from tests.support.security import ClientSecurity

LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")
# librdkafka with the KIP-848 protocol: the assignment is the coordinator's (server-side).
CONSUMER_PROTOCOL = "confluent-kafka-consumer-protocol"
JAVA_CONSUMER_PROTOCOL = "java-consumer-protocol"
POLL_S = 0.05
MAX_RECORDS = 500
CALL_TIMEOUT_S = 30


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    value: bytes


@dataclass(frozen=True, slots=True)
class MemberSettings:
    bootstrap: str
    group: str
    topic: str
    client_id: str
    instance_id: str | None = None
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 100
    security: ClientSecurity | None = None     # None: plaintext
    # The assignor by its protocol name: "roundrobin", "range", or, for librdkafka, the Java
    # client and kafka-python only, "cooperative-sticky" (KIP-429 rebalances)
    assignor: str = "roundrobin"
    # None: only the test commits (auto-commit off); else the library's own auto-commit, each
    # library's default way of committing, at this interval
    auto_commit_interval_ms: int | None = None

    def auto_commit(self) -> dict:
        """librdkafka's and the Java client's auto-commit settings."""
        if self.auto_commit_interval_ms is None:
            return {"enable.auto.commit": False}
        return {"enable.auto.commit": True, "auto.commit.interval.ms": self.auto_commit_interval_ms}

    def auto_commit_python(self) -> dict:
        """kafka-python's and aiokafka's."""
        if self.auto_commit_interval_ms is None:
            return {"enable_auto_commit": False}
        return {"enable_auto_commit": True, "auto_commit_interval_ms": self.auto_commit_interval_ms}


# kafka-python's and aiokafka's assignor classes by package and protocol name: module, class.
# The eager ones have the same names in both; only kafka-python has a KIP-429 one.
EAGER_PYTHON_ASSIGNORS = {"roundrobin": ("roundrobin", "RoundRobinPartitionAssignor"),
                          "range": ("range", "RangePartitionAssignor")}
PYTHON_ASSIGNORS = {
    "kafka": {**EAGER_PYTHON_ASSIGNORS, "cooperative-sticky": ("cooperative_sticky", "CooperativeStickyAssignor")},
    "aiokafka": EAGER_PYTHON_ASSIGNORS,
}


def python_assignor(package: str, name: str) -> type:
    """The assignor class of protocol `name` in `package` ("kafka" or "aiokafka")."""
    assignors = PYTHON_ASSIGNORS[package]
    if name not in assignors:
        # a member's driver fails with this on its thread, and the test with it (Member.check)
        raise ValueError(f"{package} has no assignor {name!r} here; it has {sorted(assignors)}")
    module, cls = assignors[name]
    return getattr(importlib.import_module(f"{package}.coordinator.assignors.{module}"), cls)


def partition_numbers(partitions) -> list[int]:
    return sorted(tp.partition for tp in partitions)


def recording_listener(base: type, events: list[dict]):
    """A `base` (kafka-python's or aiokafka's ConsumerRebalanceListener) that appends each
    call to `events`, one dict a call, as the Java member reports its listener's."""
    class Recording(base):
        def on_partitions_revoked(self, revoked) -> None:
            events.append({"revoked": partition_numbers(revoked)})

        def on_partitions_assigned(self, assigned) -> None:
            events.append({"assigned": partition_numbers(assigned)})
    return Recording()


def commit_consumed(consumer) -> None:
    """librdkafka's synchronous commit of what was consumed. It refuses one with nothing
    stored for the partitions held now (_NO_OFFSET): nothing consumed since the last commit,
    or a rebalance took the partitions that were; there is nothing to commit then."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:
            raise


class ConfluentDriver:
    def __init__(self, s: MemberSettings):
        from confluent_kafka import Consumer

        self.events: list[dict] = []  # what on_assign and on_revoke were told, one dict a call
        self.consumer = Consumer(self.config(s))
        self.consumer.subscribe([s.topic], on_assign=self._assigned, on_revoke=self._revoked)

    def config(self, s: MemberSettings) -> dict:
        conf = {"bootstrap.servers": s.bootstrap, "group.id": s.group, "client.id": s.client_id,
                **s.auto_commit(), "auto.offset.reset": "earliest",
                "session.timeout.ms": s.session_timeout_ms, "heartbeat.interval.ms": s.heartbeat_interval_ms,
                "partition.assignment.strategy": s.assignor, "topic.metadata.refresh.interval.ms": 1000}
        if s.instance_id:
            conf["group.instance.id"] = s.instance_id
        if s.security:
            conf.update(s.security.confluent())
        return conf

    def _assigned(self, consumer, partitions) -> None:
        self.events.append({"assigned": partition_numbers(partitions)})

    def _revoked(self, consumer, partitions) -> None:
        self.events.append({"revoked": partition_numbers(partitions)})

    def poll(self, timeout_s: float) -> list[Consumed]:
        out = []
        for m in self.consumer.consume(num_messages=MAX_RECORDS, timeout=timeout_s):
            if m.error() is None:
                out.append(Consumed(m.partition(), m.offset(), m.value()))
        return out

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self) -> None:
        commit_consumed(self.consumer)

    def close(self) -> None:
        self.consumer.close()


class ConsumerProtocolDriver(ConfluentDriver):
    """librdkafka with `group.protocol=consumer` (KIP-848): the coordinator assigns, so
    no assignor, session timeout or heartbeat interval is set client-side (librdkafka
    refuses them). Revoked partitions are committed before they are released, so the
    next owner resumes exactly where this one stopped."""

    def config(self, s: MemberSettings) -> dict:
        conf = {"bootstrap.servers": s.bootstrap, "group.id": s.group, "client.id": s.client_id,
                "group.protocol": "consumer", **s.auto_commit(), "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000}
        if s.instance_id:
            conf["group.instance.id"] = s.instance_id
        return conf

    def _revoked(self, consumer, partitions) -> None:
        commit_consumed(consumer)
        super()._revoked(consumer, partitions)


class KafkaPythonDriver:
    def __init__(self, s: MemberSettings):
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        self.events: list[dict] = []
        self.consumer = KafkaConsumer(
            bootstrap_servers=s.bootstrap, group_id=s.group, client_id=s.client_id,
            group_instance_id=s.instance_id, **s.auto_commit_python(), auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms, heartbeat_interval_ms=s.heartbeat_interval_ms,
            partition_assignment_strategy=(python_assignor("kafka", s.assignor),), metadata_max_age_ms=1000,
            **(s.security.kafka_python() if s.security else {}))
        self.consumer.subscribe([s.topic], listener=recording_listener(ConsumerRebalanceListener, self.events))

    def poll(self, timeout_s: float) -> list[Consumed]:
        from kafka.errors import KafkaError

        try:
            batches = self.consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=MAX_RECORDS)
        except KafkaError as exc:
            if not exc.retriable:
                raise
            return []     # a broker failing over (LEADER_NOT_AVAILABLE): an application polls again
        if leader_stalled(self.consumer):
            rejoin(self.consumer)
        return [Consumed(r.partition, r.offset, r.value) for records in batches.values() for r in records]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self) -> None:
        commit_through_rejoin(self.consumer)

    def close(self) -> None:
        self.consumer.close(autocommit=False)


def leader_stalled(consumer) -> bool:
    """kafka-python's leader stall (docs/kafka-python-leader-stall.md): a join task is left
    behind although the client sees no reason to rejoin, so no poll() collects its answer.
    Seen against Kafka's own coordinator as well as kgc's; a polling member recovers it."""
    coordinator = consumer._coordinator
    return coordinator._join_task is not None and not coordinator.need_rejoin()


def rejoin(consumer) -> bool:
    """A join still in flight is awaited as it is; one that finished unapplied is redone."""
    coordinator = consumer._coordinator
    coordinator.request_rejoin()
    return coordinator.ensure_active_group(timeout_ms=CALL_TIMEOUT_S * 1000)


def commit_through_rejoin(consumer, offsets=None) -> None:
    """kafka-python's synchronous commit, as an application that survives the client's
    leader stall does it (docs/kafka-python-leader-stall.md): a commit refused because the
    member is rebalancing waits for the rejoin to end (starting it again if it ended
    unapplied) and is retried once. A rejoin kgc never answers still fails the commit."""
    from kafka.errors import RebalanceInProgressError

    try:
        consumer.commit(offsets)
    except RebalanceInProgressError:
        if not rejoin(consumer):
            raise
        consumer.commit(offsets)


class AiokafkaDriver:
    """aiokafka on a loop owned by the member's thread: the loop (and so the heartbeat task)
    runs while the member polls, which it does all the time."""

    def __init__(self, s: MemberSettings):
        self.events: list[dict] = []
        self.loop = asyncio.new_event_loop()
        self.consumer = self.loop.run_until_complete(self._start(s))

    async def _start(self, s: MemberSettings):
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        consumer = AIOKafkaConsumer(
            bootstrap_servers=s.bootstrap, group_id=s.group, client_id=s.client_id,
            group_instance_id=s.instance_id, **s.auto_commit_python(), auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms, heartbeat_interval_ms=s.heartbeat_interval_ms,
            partition_assignment_strategy=(python_assignor("aiokafka", s.assignor),), metadata_max_age_ms=1000,
            **(s.security.aiokafka() if s.security else {}))
        consumer.subscribe([s.topic], listener=recording_listener(ConsumerRebalanceListener, self.events))
        await consumer.start()
        return consumer

    def poll(self, timeout_s: float) -> list[Consumed]:
        batches = self.loop.run_until_complete(
            self.consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=MAX_RECORDS))
        return [Consumed(r.partition, r.offset, r.value) for records in batches.values() for r in records]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self) -> None:
        self.loop.run_until_complete(self.consumer.commit())

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.consumer.stop())
        finally:
            self.loop.close()


class AsyncCommitError(RuntimeError):
    """A library reported an asynchronous commit failed, or never answered one."""


class AsyncCommits:
    """An application's side of asynchronous commits: the library's callback answers each
    one sent (`answered`) and its failures are kept, for the member's next poll to raise, as
    JavaDriver does with the Java client's, so that a test fails on them."""

    def __init__(self) -> None:
        self.unanswered = 0
        self.failures: list[str] = []

    def sent(self) -> None:
        self.unanswered += 1

    def answered(self, failure: str | None) -> None:
        self.unanswered -= 1
        if failure is not None:
            self.failures.append(failure)

    def raise_failures(self) -> None:
        if self.failures:
            raise AsyncCommitError(f"async commit failed: {self.failures}")

    def raise_unless_all_landed(self) -> None:
        """After the consumer closed: every commit sent was answered, and without an error."""
        self.raise_failures()
        if self.unanswered:
            raise AsyncCommitError(f"{self.unanswered} async commits never answered")


class AsyncCommitting:
    """Mixed into a driver (before it) that commits asynchronously: each poll, during which
    the library answers commits, raises the failures answered."""

    def __init__(self, s: MemberSettings):
        self.commits = AsyncCommits()
        super().__init__(s)  # the driver's, next in the MRO

    def poll(self, timeout_s: float) -> list[Consumed]:
        batch = super().poll(timeout_s)
        self.commits.raise_failures()
        return batch


class ConfluentAsyncCommitDriver(AsyncCommitting, ConfluentDriver):
    """`commit(asynchronous=True)`, answered through `on_commit`. librdkafka's close waits for
    the commits in flight and serves their callbacks, as the Java client's does, so closing
    is all it takes for them to land; close then checks that every one was answered."""

    def config(self, s: MemberSettings) -> dict:
        return {**super().config(s), "on_commit": self._on_commit}

    def _on_commit(self, error, partitions) -> None:
        from confluent_kafka import KafkaError

        # _NO_OFFSET: nothing consumed since the last commit (see commit_consumed)
        failures = [str(error)] if error is not None and error.code() != KafkaError._NO_OFFSET else []
        failures += [f"partition {tp.partition}: {tp.error}" for tp in partitions if tp.error is not None]
        self.commits.answered("; ".join(failures) or None)

    def commit(self) -> None:
        self.consumer.commit(asynchronous=True)
        self.commits.sent()

    def close(self) -> None:
        super().close()
        self.commits.raise_unless_all_landed()


class KafkaPythonAsyncCommitDriver(AsyncCommitting, KafkaPythonDriver):
    """`commit_async`, with a callback that kafka-python calls from a later poll. Its close
    calls none (a commit sent just before it lands, its answer unread), so a failure of the
    last commits would go unseen: before closing, the driver stops fetching and polls until
    every commit was answered."""

    def _on_commit(self, offsets, response) -> None:
        self.commits.answered(repr(response) if isinstance(response, Exception) else None)

    def commit(self) -> None:
        self.consumer.commit_async(callback=self._on_commit)
        self.commits.sent()

    def close(self) -> None:
        self.consumer.pause(*self.consumer.assignment())
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while self.commits.unanswered and time.monotonic() < deadline:
            # The library's poll, not the mixin's: a failure answered here is raised once the
            # consumer is closed, not instead of closing it.
            KafkaPythonDriver.poll(self, POLL_S)
        super().close()
        self.commits.raise_unless_all_landed()


class AiokafkaAsyncCommitDriver(AsyncCommitting, AiokafkaDriver):
    """aiokafka's commit without waiting, as its documentation of `commit()` gives it ("fire
    and forget"): a task of its own, whose done callback is the answer. The task runs while
    the member polls (the loop runs then). Nothing in stop() waits for such tasks, and the
    loop closes after it, so close waits for those in flight first."""

    def __init__(self, s: MemberSettings):
        self.in_flight: set[asyncio.Task] = set()
        super().__init__(s)

    def _on_commit(self, task: asyncio.Task) -> None:
        self.in_flight.discard(task)
        failure = "cancelled" if task.cancelled() else task.exception()
        self.commits.answered(None if failure is None else repr(failure))

    def commit(self) -> None:
        task = self.loop.create_task(self.consumer.commit())
        task.add_done_callback(self._on_commit)
        self.in_flight.add(task)
        self.commits.sent()

    def close(self) -> None:
        if self.in_flight:
            self.loop.run_until_complete(asyncio.wait(self.in_flight, timeout=CALL_TIMEOUT_S))
        super().close()
        self.commits.raise_unless_all_landed()


class JavaDriver:
    """The Java client (kafka-clients 4.x) in a JVM of its own (tests/support/java_client.py)."""

    protocol = "classic"
    commits = "sync"

    def __init__(self, s: MemberSettings):
        self.java = JavaProcess(s.bootstrap, s.group, s.topic, java_properties(s, self.protocol, self.commits))
        self.events: list[dict] = []  # what its rebalance listener was told, poll by poll

    def poll(self, timeout_s: float) -> list[Consumed]:
        answer = self.java.ask(f"poll {int(timeout_s * 1000)}")
        if "commit_error" in answer:
            raise JavaMemberError(f"async commit failed: {answer['commit_error']}")
        events = {k: v for k, v in answer.items() if k != "records"}
        if events:
            self.events.append(events)
        return [Consumed(p, o, base64.b64decode(v)) for p, o, v in answer["records"]]

    def assignment(self) -> frozenset[int]:
        return frozenset(self.java.ask("assignment")["assignment"])

    def commit(self, offsets: dict[int, int] | None = None) -> None:
        """What was consumed, or `offsets` (partition -> offset) of the subscribed topic."""
        self.java.ask(" ".join(["commit", *(f"{p}={o}" for p, o in (offsets or {}).items())]))

    def close(self) -> None:
        self.java.close()


class JavaAsyncCommitDriver(JavaDriver):
    commits = "async"


class JavaConsumerProtocolDriver(JavaDriver):
    """`group.protocol=consumer` (KIP-848): the coordinator assigns."""

    protocol = "consumer"


DRIVERS: dict[str, Callable[[MemberSettings], object]] = {
    "confluent-kafka": ConfluentDriver,
    "confluent-kafka-async-commits": ConfluentAsyncCommitDriver,
    CONSUMER_PROTOCOL: ConsumerProtocolDriver,
    "kafka-python": KafkaPythonDriver,
    "kafka-python-async-commits": KafkaPythonAsyncCommitDriver,
    "aiokafka": AiokafkaDriver,
    "aiokafka-async-commits": AiokafkaAsyncCommitDriver,
    "java": JavaDriver,
    "java-async-commits": JavaAsyncCommitDriver,
    JAVA_CONSUMER_PROTOCOL: JavaConsumerProtocolDriver,
}


class Member:
    """One consumer of `library` on its own thread."""

    def __init__(self, library: str, settings: MemberSettings):
        self.library = library
        self.name = settings.client_id
        self._settings = settings
        self._lock = threading.Lock()
        self._consumed: list[Consumed] = []
        self._assignments: list[frozenset[int]] = []
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"member-{self.name}", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            driver = DRIVERS[self.library](self._settings)
        except BaseException as exc:  # surfaced to the test by `check`
            self.error = exc
            return
        try:
            while not self._stopped.is_set():
                self._run_commands(driver)
                if self._stopped.is_set():
                    return
                batch = driver.poll(POLL_S)
                assigned = driver.assignment()
                with self._lock:
                    self._consumed += batch
                    if not self._assignments or self._assignments[-1] != assigned:
                        self._assignments.append(assigned)
        except BaseException as exc:
            self.error = exc

    def _run_commands(self, driver) -> None:
        while True:
            try:
                op, future = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(op(driver))
            except BaseException as exc:
                future.set_exception(exc)

    def call(self, op: Callable[[object], object], timeout_s: float = CALL_TIMEOUT_S):
        """Run `op(driver)` on the member's thread and return its result. A member whose
        thread fails meanwhile (a poll raising) never runs `op`: its failure is raised then,
        rather than a timeout that hides it."""
        self.check()
        future = concurrent.futures.Future()
        self._commands.put((op, future))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return future.result(min(POLL_S, max(0.0, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                self.check()
                if time.monotonic() >= deadline:
                    raise

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.name} ({self.library}) failed: {self.error!r}") from self.error

    def commit(self) -> None:
        self.call(lambda d: d.commit())

    def close(self) -> None:
        """Close the consumer (a dynamic member leaves the group; a static one does not)."""
        def close(driver):
            self._stopped.set()
            driver.close()
        self.call(close)
        self._thread.join(CALL_TIMEOUT_S)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def consumed(self) -> list[Consumed]:
        with self._lock:
            return list(self._consumed)

    @property
    def assignment(self) -> frozenset[int]:
        with self._lock:
            return self._assignments[-1] if self._assignments else frozenset()

    def positions(self) -> dict[int, int]:
        """Per partition, the offset after the highest this member consumed (for a failed
        wait's message: which partition stopped where)."""
        with self._lock:
            consumed = list(self._consumed)
        positions: dict[int, int] = {}
        for c in consumed:
            positions[c.partition] = max(positions.get(c.partition, 0), c.offset + 1)
        return dict(sorted(positions.items()))

    @property
    def assignment_history(self) -> list[frozenset[int]]:
        """Every distinct assignment this member has held, oldest first."""
        with self._lock:
            return list(self._assignments)

    @property
    def assignment_changes(self) -> int:
        """How many distinct assignments this member has gone through (one per rebalance it saw)."""
        with self._lock:
            return len(self._assignments)


def wait_until(condition: Callable[[], bool], timeout_s: float, what: Callable[[], str],
               members: list[Member] = ()) -> float:
    """Poll `condition` (bounded); returns the seconds it took. Member failures stop the wait."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        for m in members:
            m.check()
        if condition():
            return time.monotonic() - start
        time.sleep(0.01)
    raise AssertionError(f"not after {timeout_s}s: {what()}")
