"""A mixed group through kgc in front of Tansu: classic members (kafka-python, aiokafka,
confluent-kafka with the classic protocol) and a confluent-kafka `group.protocol=consumer`
member in one group, through an online upgrade (the KIP-848 member joins the live classic
group) and back (it leaves, and the classic members rebalance among themselves).

The coordinator's own view is sampled on a thread the whole time: ConsumerGroupDescribe
while the group is a consumer group (every partition a member holds, the ones it is still
revoking included), DescribeGroups while it is classic; no partition ever has two owners.
Records carry `partition:sequence`, so a lost or duplicated record shows.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter

import pytest
from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from coordinator.probe import request_response
from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    produce_sequenced,
    sequences_by_partition,
)
from tests.support.clients import CONSUMER_PROTOCOL, LIBRARIES, Member, MemberSettings, wait_until
from tests.support.consumer_group_describe import describe, held

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
BATCH = 20
TIMEOUT_S = 60


def classic_view(bootstrap: str, group: str) -> tuple[str, dict[str, list[int]]]:
    """DescribeGroups (v5: a consumer group reads as Dead): state, member id -> partitions."""
    host, port = bootstrap.rsplit(":", 1)
    described = request_response((host, int(port)), DescribeGroupsRequest[5](
        groups=[group], include_authorized_operations=False), DescribeGroupsResponse)
    [g] = described.groups
    owned = {}
    for m in g.members:
        decoded = ConsumerProtocolAssignment.decode(m.member_assignment) if m.member_assignment else None
        owned[m.member_id] = sorted(p for tp in decoded.assigned_partitions for p in tp.partitions) if decoded else []
    return g.group_state, owned


class OwnerSampler:
    """Samples the coordinator's view of who holds what until stopped; remembers every
    sample in which a partition had two owners, and which kind of group it saw."""

    def __init__(self, bootstrap: str, group: str):
        self.bootstrap, self.group = bootstrap, group
        self.violations: list[dict[str, list[int]]] = []
        self.kinds: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="owner-sampler", daemon=True)

    def __enter__(self) -> OwnerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def view(self) -> tuple[str, str, dict[str, list[int]]]:
        """(consumer | classic, state, member id -> partitions held)."""
        group = describe(self.bootstrap, self.group)
        if group.error_code == 0:
            return "consumer", group.group_state, held(group)
        state, owned = classic_view(self.bootstrap, self.group)
        return "classic", state, owned

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with contextlib.suppress(OSError, TimeoutError):
                kind, _, owned = self.view()
                self.samples += 1
                self.kinds[kind] += 1
                counts = Counter(p for partitions in owned.values() for p in partitions)
                if any(n > 1 for n in counts.values()):
                    self.violations.append(owned)


def settled(sampler: OwnerSampler, kind: str, members: int) -> bool:
    seen_kind, state, owned = sampler.view()
    return (seen_kind, state, len(owned)) == (kind, "Stable", members) and sorted(
        p for ps in owned.values() for p in ps) == list(range(PARTITIONS))


def consumed_all(members: list[Member], batches: int) -> bool:
    return sum(len(m.consumed) for m in members) >= PARTITIONS * BATCH * batches


def assert_exactly_once(members: list[Member], batches: int) -> None:
    by_partition = sequences_by_partition(r for m in members for r in m.consumed)
    assert {p: sorted(s) for p, s in by_partition.items()} == {
        p: list(range(BATCH * batches)) for p in range(PARTITIONS)}


# The classic members: eager rebalances (three libraries sharing "roundrobin"), or
# librdkafka's cooperative-sticky (KIP-429), whose members keep their partitions while
# they rejoin and give up only those the server's assignment takes away.
CLASSIC = {
    "eager": (LIBRARIES, "roundrobin"),
    "cooperative": (("confluent-kafka", "confluent-kafka"), "cooperative-sticky"),
}


@pytest.mark.parametrize(("libraries", "assignor"), CLASSIC.values(), ids=CLASSIC.keys())
def test_a_mixed_group_upgrades_online_and_back_with_one_owner_per_partition(kgc, libraries, assignor):
    bootstrap = kgc.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("mixed848")

    def member(library: str, name: str) -> Member:
        return Member(library, MemberSettings(bootstrap, group, topic, name, assignor=assignor)).start()

    classic = [member(lib, f"classic-{i}-{lib}") for i, lib in enumerate(libraries)]
    n = len(classic)
    everyone = list(classic)
    try:
        with OwnerSampler(bootstrap, group) as sampler:
            def show() -> str:
                return str(sampler.view())

            wait_until(lambda: settled(sampler, "classic", n), TIMEOUT_S, show, classic)
            classic_ids = set(sampler.view()[2])
            produce_sequenced(bootstrap, topic, PARTITIONS, BATCH)
            wait_until(lambda: consumed_all(classic, 1), TIMEOUT_S, show, classic)
            for m in classic:
                m.commit()

            # Upgrade: the first KIP-848 member joins the live classic group.
            new = member(CONSUMER_PROTOCOL, "kip848")
            everyone.append(new)
            wait_until(lambda: settled(sampler, "consumer", n + 1), TIMEOUT_S, show, everyone)
            group_view = describe(bootstrap, group)
            # Online: the classic members went on under their member ids, as classic members.
            assert {m.member_id for m in group_view.members if m.member_type == 0} == classic_ids
            assert sorted(m.member_type for m in group_view.members) == [0] * n + [1]
            assert held(group_view)[next(m.member_id for m in group_view.members if m.member_type == 1)]
            produce_sequenced(bootstrap, topic, PARTITIONS, BATCH, first_sequence=BATCH)
            wait_until(lambda: consumed_all(everyone, 2), TIMEOUT_S, show, everyone)
            assert new.consumed, "the KIP-848 member consumed nothing"
            for m in everyone:
                m.commit()
            assert committed_offsets(bootstrap, group) == {p: 2 * BATCH for p in range(PARTITIONS)}

            # Downgrade: the last KIP-848 member leaves; the classic members go on as a classic group.
            new.close()
            wait_until(lambda: settled(sampler, "classic", n), TIMEOUT_S, show, classic)
            assert set(sampler.view()[2]) == classic_ids
            produce_sequenced(bootstrap, topic, PARTITIONS, BATCH, first_sequence=2 * BATCH)
            wait_until(lambda: consumed_all(everyone, 3), TIMEOUT_S, show, classic)
        assert sampler.violations == [], sampler.violations[:3]
        assert sampler.kinds["consumer"] > 0 and sampler.kinds["classic"] > 0
        assert_exactly_once(everyone, 3)
    finally:
        for m in everyone:
            if m.error is None and m.running:
                with contextlib.suppress(Exception):
                    m.close()


def test_a_mixed_group_continues_after_kgc_is_killed(kgc848):
    """kgc (with a data dir) SIGKILLed while a group it upgraded has classic and KIP-848
    members: loaded from the log, the same members of both kinds go on at their epochs,
    nothing is lost, and the group still downgrades when the KIP-848 member leaves."""
    bootstrap = kgc848.bootstrap
    topic, group = create_topic(bootstrap, PARTITIONS), new_name("mixed848-restart")

    def member(library: str, name: str) -> Member:
        return Member(library, MemberSettings(bootstrap, group, topic, name)).start()

    classic = [member("confluent-kafka", f"classic-{i}") for i in range(2)]
    everyone = list(classic)
    try:
        with OwnerSampler(bootstrap, group) as sampler:
            def show() -> str:
                return str(sampler.view())

            wait_until(lambda: settled(sampler, "classic", 2), TIMEOUT_S, show, classic)
            new = member(CONSUMER_PROTOCOL, "kip848")
            everyone.append(new)
            wait_until(lambda: settled(sampler, "consumer", 3), TIMEOUT_S, show, everyone)
            before = describe(bootstrap, group)
            kgc848.kill()
            kgc848.start()
            after = describe(bootstrap, group)
            assert after.group_epoch == before.group_epoch
            assert {(m.member_id, m.member_type) for m in after.members} == {
                (m.member_id, m.member_type) for m in before.members}
            produce_sequenced(bootstrap, topic, PARTITIONS, BATCH)
            wait_until(lambda: {(r.partition, r.value) for m in everyone for r in m.consumed}
                       >= {(p, b"%d:%d" % (p, s)) for p in range(PARTITIONS) for s in range(BATCH)}, TIMEOUT_S,
                       lambda: "records lost across the restart", everyone)
            wait_until(lambda: settled(sampler, "consumer", 3), TIMEOUT_S, show, everyone)
            new.close()
            wait_until(lambda: settled(sampler, "classic", 2), TIMEOUT_S, show, classic)
        assert sampler.violations == [], sampler.violations[:3]
    finally:
        for m in everyone:
            if m.error is None and m.running:
                with contextlib.suppress(Exception):
                    m.close()
