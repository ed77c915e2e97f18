"""Unmodified consumers through kgc in front of a real Apache Kafka broker.

Clients bootstrap against kgc only. Each library's own group code forms a 3-member group,
consumes every record exactly once, rebalances when a member closes, commits, and a new
member resumes at the committed offsets. The group lives in kgc: Kafka, asked on its own
port, never hears of it.
"""

from __future__ import annotations

import logging
import time

import pytest

from tests.support.admin import (
    UNKNOWN_AT_KAFKA,
    committed_offsets,
    create_topic,
    describe_group,
    group_at_broker,
    group_ids,
    new_name,
    produce_sequenced,
    sequences_by_partition,
)
from tests.support.clients import (
    CONSUMER_PROTOCOL,
    JAVA_CONSUMER_PROTOCOL,
    LIBRARIES,
    Consumed,
    Member,
    MemberSettings,
    wait_until,
)
from tests.support.settled_members import (
    FORM_TIMEOUT_S,
    PARTITIONS,
    close_all,
    owns_all_partitions,
    wait_settled,
)

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FIRST_BATCH = 40          # records per partition, consumed by three members
SECOND_BATCH = 30         # after one member left, consumed by the other two
RESUME_BATCH = 10         # after everyone closed, consumed by a new member
CONSUME_TIMEOUT_S = 30
# Generous on purpose: a loaded 2-core machine must not fail this. Typical values are
# logged here.
RECOVERY_BOUND_S = 5.0
AUTO_COMMIT_MS = 200      # the libraries default to 5 s; the path is the same

GROUPS = {
    "confluent-kafka": ("confluent-kafka",) * 3,
    "kafka-python": ("kafka-python",) * 3,
    "aiokafka": ("aiokafka",) * 3,
    "java": ("java",) * 3,
    "java-async-commits": ("java-async-commits",) * 3,
    "confluent-kafka-async-commits": ("confluent-kafka-async-commits",) * 3,
    "kafka-python-async-commits": ("kafka-python-async-commits",) * 3,
    "aiokafka-async-commits": ("aiokafka-async-commits",) * 3,
    "mixed": LIBRARIES,
    "mixed-with-java": ("confluent-kafka", "java", "kafka-python", "aiokafka"),
}


def start_members(kgc, group: str, topic: str, libraries, **settings) -> list[Member]:
    return [Member(lib, MemberSettings(kgc.bootstrap, group, topic, client_id=f"{group}-{i}", **settings)).start()
            for i, lib in enumerate(libraries)]


def assert_owns_all_partitions_disjointly(members: list[Member]) -> None:
    owned = [p for m in members for p in m.assignment]
    assert sorted(owned) == list(range(PARTITIONS)), {m.name: m.assignment for m in members}


def wait_consumed(members: list[Member], total: int) -> None:
    wait_until(lambda: sum(len(m.consumed) for m in members) >= total, CONSUME_TIMEOUT_S,
               lambda: {m.name: len(m.consumed) for m in members}, members)


def assert_exactly_once_in_order(members: list[Member], per_partition: int, first: int = 0) -> None:
    everything: list[Consumed] = [r for m in members for r in m.consumed]
    by_partition = sequences_by_partition(everything)
    expected = list(range(first, first + per_partition))
    assert {p: sorted(seqs) for p, seqs in by_partition.items()} == {p: expected for p in range(PARTITIONS)}
    for m in members:  # no duplicates above, and each member saw its partitions in order
        for p, seqs in sequences_by_partition(m.consumed).items():
            assert seqs == sorted(seqs), (m.name, p)


def assert_group_unknown_upstream(kafka, group: str) -> None:
    state, members = group_at_broker(kafka.host, kafka.port, group)
    assert (state, members) == UNKNOWN_AT_KAFKA


@pytest.mark.parametrize("libraries", GROUPS.values(), ids=GROUPS.keys())
def test_three_members_share_partitions_rebalance_on_leave_and_a_new_member_resumes(kgc, kafka, libraries):
    topic = create_topic(kgc.bootstrap, PARTITIONS)
    group = new_name("g")
    members = start_members(kgc, group, topic, libraries)
    try:
        wait_settled(kgc, group, members)
        assert_group_unknown_upstream(kafka, group)
        assert group in group_ids(kgc.bootstrap)

        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST_BATCH)
        wait_consumed(members, PARTITIONS * FIRST_BATCH)
        assert_exactly_once_in_order(members, FIRST_BATCH)
        for m in members:
            m.commit()

        leaving, staying = members[-1], members[:-1]
        leaving.close()
        left_at = time.monotonic()
        wait_until(lambda: owns_all_partitions(staying), FORM_TIMEOUT_S,
                   lambda: {m.name: m.assignment for m in staying}, staying)
        recovery_s = time.monotonic() - left_at
        log.info("%s: remaining members own every partition %.3f s after a clean leave", libraries, recovery_s)
        assert recovery_s < RECOVERY_BOUND_S
        wait_settled(kgc, group, staying)

        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, SECOND_BATCH, first_sequence=FIRST_BATCH)
        wait_consumed(members, PARTITIONS * (FIRST_BATCH + SECOND_BATCH))
        assert_exactly_once_in_order(members, FIRST_BATCH + SECOND_BATCH)
        for m in staying:
            m.commit()
        for m in staying:
            m.close()
        consumed_so_far = FIRST_BATCH + SECOND_BATCH
        assert committed_offsets(kgc.bootstrap, group) == {p: consumed_so_far for p in range(PARTITIONS)}
        assert describe_group(kgc.bootstrap, group)["group_state"] == "Empty"

        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, RESUME_BATCH, first_sequence=consumed_so_far)
        [resumer] = start_members(kgc, group, topic, libraries[1:2])
        members.append(resumer)
        wait_consumed([resumer], PARTITIONS * RESUME_BATCH)
        first_offsets = {p: min(r.offset for r in resumer.consumed if r.partition == p) for p in range(PARTITIONS)}
        assert first_offsets == {p: consumed_so_far for p in range(PARTITIONS)}
        assert_exactly_once_in_order([resumer], RESUME_BATCH, first=consumed_so_far)
        assert_group_unknown_upstream(kafka, group)
    finally:
        close_all(members)


@pytest.mark.parametrize("library", (*LIBRARIES, "java"))
def test_a_static_member_restarted_within_its_session_gets_its_partitions_back_without_a_rebalance(
        kgc, library):
    topic = create_topic(kgc.bootstrap, PARTITIONS)
    group = new_name("static")
    members = [Member(library, MemberSettings(kgc.bootstrap, group, topic, client_id=f"{group}-{i}",
                                              instance_id=f"instance-{i}", session_timeout_ms=10_000)).start()
               for i in range(3)]
    try:
        wait_settled(kgc, group, members)
        before = describe_group(kgc.bootstrap, group)
        member_ids = {m["group_instance_id"]: m["member_id"] for m in before["members"]}
        restarted, others = members[-1], members[:-1]
        kept = {m.name: m.assignment for m in others}
        changes = {m.name: m.assignment_changes for m in others}

        restarted.close()  # a static member does not leave the group when it closes
        assert describe_group(kgc.bootstrap, group)["group_state"] == "Stable"
        successor = Member(library, MemberSettings(kgc.bootstrap, group, topic, client_id=restarted.name,
                                                   instance_id="instance-2", session_timeout_ms=10_000)).start()
        members.append(successor)
        wait_until(lambda: successor.assignment == restarted.assignment, FORM_TIMEOUT_S,
                   lambda: f"successor has {successor.assignment}, expected {restarted.assignment}", members)

        after = describe_group(kgc.bootstrap, group)
        assert after["group_state"] == "Stable"
        new_ids = {m["group_instance_id"]: m["member_id"] for m in after["members"]}
        assert new_ids.keys() == member_ids.keys()
        assert new_ids["instance-2"] != member_ids["instance-2"]  # the successor is a new member id
        assert {k: v for k, v in new_ids.items() if k != "instance-2"} == \
            {k: v for k, v in member_ids.items() if k != "instance-2"}
        assert {m.name: m.assignment for m in others} == kept
        assert {m.name: m.assignment_changes for m in others} == changes  # they saw no rebalance
    finally:
        close_all(members)


def test_a_group_formed_directly_on_the_upstream_is_visible_there(kafka):
    """The control for `assert_group_unknown_upstream`: the probe does see a group that Kafka
    coordinates, so its silence about kgc's groups means something."""
    topic = create_topic(kafka.bootstrap, 1)
    group = new_name("direct")
    [member] = [Member("confluent-kafka", MemberSettings(kafka.bootstrap, group, topic, client_id="direct")).start()]
    try:
        wait_until(lambda: member.assignment == {0}, FORM_TIMEOUT_S, lambda: str(member.assignment), [member])
        assert group_at_broker(kafka.host, kafka.port, group) == ("Stable", 1)
    finally:
        member.close()


@pytest.mark.parametrize("library", ("java", *LIBRARIES))
def test_members_with_the_range_assignor_get_contiguous_ranges_and_their_listener_is_told(kgc, library):
    topic, group = create_topic(kgc.bootstrap, PARTITIONS), new_name(f"{library}-range")
    members = start_members(kgc, group, topic, (library,) * 3, assignor="range")
    try:
        wait_settled(kgc, group, members)
        assert sorted(sorted(m.assignment) for m in members) == [[0, 1], [2, 3], [4, 5]]
        assert describe_group(kgc.bootstrap, group)["protocol_data"] == "range"
        for m in members:  # the rebalance listener heard of what the member holds
            events = m.call(lambda driver: list(driver.events))
            assert set(events[-1]["assigned"]) == m.assignment, events
    finally:
        close_all(members)


# Every library here names its KIP-429 assignor "cooperative-sticky", so they mix in a group.
# The first member leaves.
COOPERATIVE_GROUPS = {
    "java-and-librdkafka": ("java", "confluent-kafka", "java"),
    "kafka-python": ("kafka-python",) * 3,
    "mixed-with-kafka-python": ("java", "kafka-python", "confluent-kafka"),
}


@pytest.mark.parametrize("libraries", COOPERATIVE_GROUPS.values(), ids=COOPERATIVE_GROUPS.keys())
def test_cooperative_sticky_members_keep_their_partitions_when_one_leaves(kgc, libraries):
    """KIP-429 through kgc: after a member leaves, the others only gain partitions; no member
    gives up one it keeps, and every record is still consumed once. The listeners are asked
    too: kafka-python keeps its old assignment until the new one replaces it, so an eager
    rebalance handing a member a superset would look like growth in its assignments alone,
    but its listener would have been told every partition was revoked."""
    topic, group = create_topic(kgc.bootstrap, PARTITIONS), new_name("coop")
    members = start_members(kgc, group, topic, libraries, assignor="cooperative-sticky")
    try:
        wait_settled(kgc, group, members)
        assert describe_group(kgc.bootstrap, group)["protocol_data"] == "cooperative-sticky"
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST_BATCH)
        wait_consumed(members, PARTITIONS * FIRST_BATCH)
        leaving, staying = members[0], members[1:]
        seen = {m.name: len(m.assignment_history) for m in staying}
        heard = {m.name: m.call(lambda driver: len(driver.events)) for m in staying}
        leaving.commit()
        leaving.close()
        wait_settled(kgc, group, staying)
        for m in staying:
            since = m.assignment_history[seen[m.name] - 1:]
            assert all(a <= b for a, b in zip(since, since[1:], strict=False)), (m.name, since)
            events = m.call(lambda driver: list(driver.events))[heard[m.name]:]
            assert not [e for e in events if e.get("revoked") or e.get("lost")], (m.name, events)
        produce_sequenced(kgc.bootstrap, topic, PARTITIONS, SECOND_BATCH, first_sequence=FIRST_BATCH)
        wait_consumed(members, PARTITIONS * (FIRST_BATCH + SECOND_BATCH))
        assert_exactly_once_in_order(members, FIRST_BATCH + SECOND_BATCH)
    finally:
        close_all(members)


@pytest.mark.parametrize("library", ("java", *LIBRARIES, JAVA_CONSUMER_PROTOCOL, CONSUMER_PROTOCOL))
def test_a_members_own_auto_commits_land_and_a_successor_resumes_there(kgc, library):
    """Auto-commit on, as every library ships it (the other tests commit themselves): what a
    member read is committed by the library, in the background or in its polls, while the
    member runs, and a member started after it resumes there, reading nothing twice."""
    topic, group = create_topic(kgc.bootstrap, PARTITIONS), new_name("auto-commit")

    def member(i: int) -> Member:
        return Member(library, MemberSettings(kgc.bootstrap, group, topic, f"{group}-{i}",
                                              auto_commit_interval_ms=AUTO_COMMIT_MS)).start()

    def wait_committed(member: Member, offset: int) -> None:
        wait_until(lambda: committed_offsets(kgc.bootstrap, group) == dict.fromkeys(range(PARTITIONS), offset),
                   CONSUME_TIMEOUT_S, lambda: str(committed_offsets(kgc.bootstrap, group)), [member])

    produce_sequenced(kgc.bootstrap, topic, PARTITIONS, FIRST_BATCH)
    first = member(0)
    try:
        wait_consumed([first], PARTITIONS * FIRST_BATCH)
        wait_committed(first, FIRST_BATCH)
    finally:
        first.close()
    produce_sequenced(kgc.bootstrap, topic, PARTITIONS, SECOND_BATCH, first_sequence=FIRST_BATCH)
    second = member(1)
    try:
        wait_consumed([second], PARTITIONS * SECOND_BATCH)
        wait_committed(second, FIRST_BATCH + SECOND_BATCH)
    finally:
        second.close()
    assert_exactly_once_in_order([first, second], FIRST_BATCH + SECOND_BATCH)
