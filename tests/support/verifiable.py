"""Kafka's VerifiableProducer and VerifiableConsumer (kafka-tools), as Kafka's own consumer
system tests drive them (tests/kafkatest/services/verifiable_{producer,consumer}.py), and the
invariants those tests assert, checked over what every consumer reported.

Each tool prints one JSON event per line on stdout; a reader thread per process keeps them.
`GroupLedger` gathers the events of every consumer of one group; its `verify` replays them in
event-time order (one machine, one clock) and names the first break of:
- no partition is held by two consumers at once;
- a consumer reads only partitions it holds, from where its reading stood (on a partition
  it was just given: not behind the group's committed offset);
- a partition's committed offset never goes backwards, and never runs past what was read.
"""

from __future__ import annotations

import heapq
import json
import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from tests.support.kafka_dist import KAFKA_VERSION, java_command

CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
STOP_TIMEOUT_S = 60


class InvariantViolation(AssertionError):
    pass


class _Tool:
    """One tool JVM, its stdout events handled by a reader thread."""

    def __init__(self, name: str, args: list[str], version: str):
        self.name = name
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(java_command(self.tool_class, *args, version=version),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True, name=f"{name}-out").start()
        threading.Thread(target=self._read_stderr, daemon=True, name=f"{name}-err").start()

    tool_class = ""

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            event["source"] = self.name
            with self._lock:
                self._on_event(event)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            del self.stderr[:-200]

    def _on_event(self, event: dict) -> None:
        pass

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM: the tool's shutdown hook closes its client cleanly."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: gone at once, its group membership left to expire."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.alive:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            raise AssertionError(f"{self.name} did not stop within {STOP_TIMEOUT_S}s") from None


class VerifiableProducer(_Tool):
    """Sequenced values ("0", "1", ...) at `throughput` per second, acks=all, keyed "0" to
    "keys - 1" in turn so that every partition gets records (a null key would stick to one
    partition for a whole batch)."""

    tool_class = PRODUCER

    def __init__(self, bootstrap: str, topic: str, *, throughput: int = 500, max_messages: int = -1,
                 keys: int = 100, version: str = KAFKA_VERSION):
        self.acked: dict[int, set[int]] = defaultdict(set)   # partition -> acknowledged offsets
        super().__init__("producer", ["--bootstrap-server", bootstrap, "--topic", topic, "--throughput",
                                      str(throughput), "--max-messages", str(max_messages), "--acks", "-1",
                                      "--repeating-keys", str(keys)],
                         version)

    def _on_event(self, event: dict) -> None:
        if event["name"] == "producer_send_success":
            self.acked[event["partition"]].add(event["offset"])


class VerifiableConsumer(_Tool):
    """One group member that commits synchronously after every poll (unless autocommit)."""

    tool_class = CONSUMER

    def __init__(self, name: str, ledger: GroupLedger, bootstrap: str, topic: str, *, protocol: str = "classic",
                 assignor: str | None = None, instance_id: str | None = None, session_timeout_ms: int | None = None,
                 version: str = KAFKA_VERSION):
        self.ledger = ledger
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", ledger.group,
                "--group-protocol", protocol, "--reset-policy", "earliest"]
        if assignor:
            args += ["--assignment-strategy" if protocol == "classic" else "--group-remote-assignor", assignor]
        if instance_id:
            args += ["--group-instance-id", instance_id]
        if session_timeout_ms:
            args += ["--session-timeout", str(session_timeout_ms)]
        super().__init__(name, args, version)

    def _on_event(self, event: dict) -> None:
        self.ledger.record(event)

    def kill(self) -> None:
        super().kill()
        self.ledger.gone(self.name)

    def stop(self) -> None:
        super().stop()
        self.ledger.gone(self.name)


# Events of one millisecond from different consumers, in the order they can have happened in
# (one consumer's own events stay in the order it printed them):
# a partition is given up before another consumer is given it, and committed before it is read.
_ORDER = {"gone": 0, "partitions_revoked": 0, "offsets_committed": 1, "partitions_assigned": 2,
          "records_consumed": 3}


@dataclass
class _Holding:
    position: int | None = None   # the next offset this consumer reads, once it has read


@dataclass
class Replay:
    """What the events say once replayed: see `GroupLedger.verify`."""

    committed: dict[int, int] = field(default_factory=dict)          # partition -> last committed
    positions: dict[int, int] = field(default_factory=dict)          # partition -> furthest read + 1
    consumed: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    revoked: dict[str, int] = field(default_factory=lambda: defaultdict(int))   # consumer -> partitions
    assignments: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def total_consumed(self) -> int:
        """Records consumed, a record consumed twice counting twice."""
        return sum(last - first + 1 for ranges in self.consumed.values() for first, last in ranges)

    def missing(self, acked: dict[int, set[int]]) -> dict[int, int]:
        """partition -> how many acknowledged records nobody consumed."""
        out = {}
        for p, offsets in acked.items():
            seen = set()
            for first, last in self.consumed.get(p, ()):
                seen.update(range(first, last + 1))
            if lost := len(offsets - seen):
                out[p] = lost
        return out


class GroupLedger:
    """Every event of every consumer of one group. Live: who holds what. `verify` replays
    the events in time order and checks the invariants."""

    def __init__(self, group: str):
        self.group = group
        self._events: list[dict] = []
        self._held: dict[str, set[int]] = defaultdict(set)
        self._lock = threading.Lock()
        self.records_consumed = 0   # by every consumer so far, a record read twice counting twice

    def record(self, event: dict) -> None:
        with self._lock:
            self._events.append(event)
            held = self._held[event["source"]]
            self.records_consumed += event.get("count", 0) if event["name"] == "records_consumed" else 0
            if event["name"] == "partitions_assigned":
                held.update(tp["partition"] for tp in event["partitions"])
            elif event["name"] == "partitions_revoked":
                held.difference_update(tp["partition"] for tp in event["partitions"])

    def gone(self, name: str) -> None:
        """A stopped or killed consumer holds nothing from now on."""
        self.record({"name": "gone", "timestamp": int(time.time() * 1000), "source": name})
        with self._lock:
            self._held.pop(name, None)

    def owners(self) -> dict[int, str]:
        with self._lock:
            return {p: name for name, held in self._held.items() for p in held}

    def verify(self) -> Replay:
        """Replays every event in time order; raises `InvariantViolation` at the first of:
        a partition held by two consumers at once; a partition read by a consumer that does
        not hold it, or from elsewhere than where its reading stood (behind the committed
        offset when it got the partition); a commit below the last one, or past what was read."""
        with self._lock:
            by_source: dict[str, list[dict]] = defaultdict(list)
            for event in self._events:
                by_source[event["source"]].append(event)
        # Each consumer's events in its own order; across consumers, by time (and _ORDER).
        events = heapq.merge(*by_source.values(), key=lambda e: (e["timestamp"], _ORDER.get(e["name"], 4)))
        out = Replay()
        holding: dict[str, dict[int, _Holding]] = defaultdict(dict)
        for e in events:
            who = e["source"]
            if e["name"] == "gone":
                holding.pop(who, None)
            elif e["name"] == "partitions_assigned":
                out.assignments[who] += 1
                for tp in e["partitions"]:
                    p = tp["partition"]
                    for other, held in holding.items():
                        if other != who and p in held:
                            raise InvariantViolation(f"partition {p} given to {who} while {other} holds it")
                    holding[who].setdefault(p, _Holding())
            elif e["name"] == "partitions_revoked":
                out.revoked[who] += len(e["partitions"])
                for tp in e["partitions"]:
                    holding[who].pop(tp["partition"], None)
            elif e["name"] == "records_consumed":
                for tp in e["partitions"]:
                    p, first, last = tp["partition"], tp["minOffset"], tp["maxOffset"]
                    at = holding[who].get(p)
                    if at is None:
                        raise InvariantViolation(f"{who} read partition {p}, which it does not hold")
                    if at.position is not None and first != at.position:
                        raise InvariantViolation(f"{who} read partition {p} from {first}, not from {at.position}")
                    # Just given the partition: from the committed offset. Later is possible only
                    # after a consumer killed between its commit and printing it.
                    if at.position is None and first < out.committed.get(p, 0):
                        raise InvariantViolation(f"{who} read partition {p} from {first}, behind the "
                                                 f"{out.committed[p]} committed")
                    at.position = last + 1
                    out.consumed[p].append((first, last))
                    out.positions[p] = max(out.positions.get(p, 0), last + 1)
            elif e["name"] == "offsets_committed" and e.get("success"):
                for tp in e["offsets"]:
                    p, offset = tp["partition"], tp["offset"]
                    if offset < out.committed.get(p, 0):
                        raise InvariantViolation(f"{who} committed {offset} on partition {p}, below the "
                                                 f"{out.committed[p]} committed before")
                    if offset > out.positions.get(p, 0):
                        raise InvariantViolation(f"{who} committed {offset} on partition {p}, past what was read")
                    out.committed[p] = offset
        return out
