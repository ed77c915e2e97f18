"""Kafka's own consumer system tests (tests/kafkatest/tests/client/consumer_test.py,
OffsetValidationTest), replayed through kgc in front of a three-node Kafka cluster
(127.0.0.11-13, replication factor 3, min ISR 2) with Kafka's VerifiableProducer and
VerifiableConsumer, asserting what those tests assert:

- every acknowledged record is consumed, and after a clean bounce none twice;
- committed offsets never go backwards; no partition is held by two consumers at once
  (tests/support/verifiable.py checks both, and more, over every consumer's events);
- the group's committed position equals what it consumed, read back through kgc.

kgc coordinates the group, so a broker's failure must not disturb it at all (no rebalance),
where on Kafka it may move the group's coordinator.
"""

from __future__ import annotations

import time

import pytest

from tests.support.admin import committed_offsets, new_name
from tests.support.kafka import KafkaCluster
from tests.support.kgc import KGC_GROUP_FLAGS, kgc_in_front_of
from tests.support.verifiable import GroupLedger, VerifiableConsumer, VerifiableProducer

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

PARTITIONS = 6
CONSUMERS = 3
THROUGHPUT = 500            # records per second, as the system tests produce
SESSION_TIMEOUT_MS = 6000   # a killed member's partitions move after this
STATIC_SESSION_TIMEOUT_MS = 30_000
MORE = 1000                 # records consumed after a fault before the test calls it survived
TIMEOUT_S = 90


@pytest.fixture(scope="module")
def cluster(kafka3):
    return kafka3


@pytest.fixture(scope="module")
def kgc(cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("kgc-system")
    with kgc_in_front_of(cluster, *KGC_GROUP_FLAGS, "--data-dir", str(root / "data"),
                         "--consumer-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                         log_path=str(root / "kgc.log")) as proc:
        yield proc


class Scenario:
    """One topic, a producer at THROUGHPUT and a group of CONSUMERS VerifiableConsumers."""

    def __init__(self, kgc, cluster: KafkaCluster, protocol: str = "classic", static: bool = False,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS):
        self.kgc, self.protocol, self.static = kgc, protocol, static
        self.session_timeout_ms = session_timeout_ms
        self.topic = new_name("system")
        cluster.create_topic(self.topic, PARTITIONS)
        self.ledger = GroupLedger(new_name("system-group"))
        self.producer = VerifiableProducer(kgc.bootstrap, self.topic, throughput=THROUGHPUT)
        self.consumers = [self.start_consumer(i) for i in range(CONSUMERS)]

    def start_consumer(self, i: int) -> VerifiableConsumer:
        classic = self.protocol == "classic"
        return VerifiableConsumer(f"c{i}-{time.monotonic_ns()}", self.ledger, self.kgc.bootstrap, self.topic,
                                  protocol=self.protocol,
                                  assignor="org.apache.kafka.clients.consumer.RangeAssignor" if classic else "range",
                                  instance_id=f"static-{i}" if self.static else None,
                                  session_timeout_ms=self.session_timeout_ms if classic else None)

    def wait_all_assigned(self, consumers=None) -> None:
        consumers = consumers or self.consumers
        deadline = time.monotonic() + TIMEOUT_S
        while sorted(self.ledger.owners()) != list(range(PARTITIONS)) or \
                set(self.ledger.owners().values()) != {c.name for c in consumers}:
            assert time.monotonic() < deadline, f"not every partition owned by {len(consumers)} members: " \
                                                f"{self.ledger.owners()}"
            for c in consumers:
                assert c.alive, f"{c.name} exited:\n{''.join(c.stderr[-30:])}"
            time.sleep(0.1)

    def wait_consumed_more(self, more: int = MORE) -> None:
        target = self.ledger.records_consumed + more
        self._wait(lambda: self.ledger.records_consumed >= target,
                   lambda: f"consumption stalled at {self.ledger.records_consumed} of {target}")

    def _wait(self, condition, what) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not condition():
            assert time.monotonic() < deadline, what()
            time.sleep(0.1)

    def bounce(self, i: int, hard: bool) -> None:
        old = self.consumers[i]
        old.kill() if hard else old.stop()
        self.consumers[i] = self.start_consumer(i)

    def finish(self, *, clean: bool):
        """Stop producing, let the group read everything, stop it cleanly, then check."""
        self.producer.stop()
        acked = {p: set(o) for p, o in self.producer.acked.items()}
        assert sorted(acked) == list(range(PARTITIONS))
        self._wait(lambda: not self.ledger.verify().missing(acked),
                   lambda: f"acknowledged records never consumed: {self.ledger.verify().missing(acked)}")
        # The commit of the last poll (a record the producer never heard acknowledged may have
        # been written all the same: it is read, and counts).
        self._wait(lambda: (r := self.ledger.verify()).committed == r.positions,
                   lambda: f"committed {self.ledger.verify().committed}, read {self.ledger.verify().positions}")
        for c in self.consumers:
            c.stop()
        replay = self.ledger.verify()
        assert replay.committed == replay.positions
        assert all(replay.positions[p] >= max(o) + 1 for p, o in acked.items())
        assert committed_offsets(self.kgc.bootstrap, self.ledger.group) == replay.committed
        if clean:
            assert replay.total_consumed == sum(replay.positions.values()), "records consumed twice"
        return replay

    def close(self) -> None:
        for tool in [self.producer, *self.consumers]:
            if tool.alive:
                tool.kill()


@pytest.fixture
def scenario(kgc, cluster):
    made = []

    def make(**kw) -> Scenario:
        made.append(Scenario(kgc, cluster, **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("mode", ["clean", "hard"])
def test_rolling_bounce_of_consumers(scenario, protocol, mode):
    s = scenario(protocol=protocol)
    s.wait_all_assigned()
    s.wait_consumed_more()
    for _ in range(2):
        for i in range(CONSUMERS):
            s.bounce(i, hard=mode == "hard")
            s.wait_all_assigned()
    s.wait_consumed_more()
    s.finish(clean=mode == "clean")


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_static_consumers_bounce_without_the_others_giving_up_partitions(scenario, static):
    """Bouncing every member but the first: a static group does not rebalance, so the first
    member never gives up a partition; a dynamic group does, every time. The session is long
    (as in Kafka's test): a restarted static member must be back before it ends, and a JVM on a
    loaded 2-core machine can take seconds to start."""
    s = scenario(static=static, session_timeout_ms=STATIC_SESSION_TIMEOUT_MS)
    s.wait_all_assigned()
    s.wait_consumed_more()
    first = s.consumers[0].name
    revoked_before = s.ledger.verify().revoked[first]
    for _ in range(2):
        for i in range(1, CONSUMERS):
            s.bounce(i, hard=False)
        s.wait_all_assigned()
    s.wait_consumed_more()
    revoked = s.ledger.verify().revoked[first] - revoked_before   # before the first closes too
    s.finish(clean=True)
    assert revoked == 0 if static else revoked > 0


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_killed_consumers_partitions_move_to_the_others(scenario, protocol):
    s = scenario(protocol=protocol)
    s.wait_all_assigned()
    s.wait_consumed_more()
    owner = s.ledger.owners()[0]
    victim = next(c for c in s.consumers if c.name == owner)
    victim.kill()
    s.consumers.remove(victim)
    s.wait_all_assigned()
    s.wait_consumed_more()
    s.finish(clean=False)


@pytest.mark.parametrize("mode", ["clean", "hard"])
def test_a_broker_failure_does_not_disturb_the_group(scenario, cluster, mode):
    """A broker stopped (SIGTERM) or killed (SIGKILL) and restarted while the group consumes:
    its partitions' leadership moves, the group keeps its members and its assignment."""
    s = scenario()
    s.wait_all_assigned()
    s.wait_consumed_more()
    assignments = dict(s.ledger.verify().assignments)
    victim = cluster.nodes[0].node_id
    cluster.kill_node(victim) if mode == "hard" else cluster.stop_node(victim)
    try:
        s.wait_consumed_more()
    finally:
        cluster.start_node(victim)
    s.wait_consumed_more()
    assert dict(s.ledger.verify().assignments) == assignments, "the group rebalanced"
    s.finish(clean=True)
