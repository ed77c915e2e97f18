"""Moving a group between Kafka's own coordinator and kgc, as a team cuts over: members that
settle before anything is produced for them, consume, commit and close, and the check that
every record was consumed once across both coordinators (by its sequence number)."""

from __future__ import annotations

from tests.support.admin import (
    committed_offsets,
    create_topic,
    new_name,
    produce_sequenced,
    sequences_by_partition,
)
from tests.support.clients import Consumed, Member, MemberSettings, wait_until
from tests.support.kgc import kgc_command
from tests.support.settled_members import PARTITIONS, owns_all_partitions

BEFORE, AFTER = 20, 15
TIMEOUT_S = 45


def members(bootstrap: str, group: str, topic: str, libraries, first: int = 0) -> list[Member]:
    return [Member(lib, MemberSettings(bootstrap, group, topic, client_id=f"{group}-{first + i}")).start()
            for i, lib in enumerate(libraries)]


def settled_members(bootstrap: str, group: str, topic: str, libraries, first: int = 0) -> list[Member]:
    """Members that own every partition once, before any record is produced for them: a
    member that consumed alone before the others joined would hand over partitions it never
    committed, and their next owner would read them again."""
    ms = members(bootstrap, group, topic, libraries, first)
    wait_until(lambda: owns_all_partitions(ms), TIMEOUT_S, lambda: {m.name: sorted(m.assignment) for m in ms}, ms)
    return ms


def consumed(ms: list[Member]) -> list[Consumed]:
    return [c for m in ms for c in m.consumed]


def wait_consumed(ms: list[Member], total: int) -> None:
    wait_until(lambda: len(consumed(ms)) >= total, TIMEOUT_S,
               lambda: {m.name: (len(m.consumed), sorted(m.assignment)) for m in ms}, ms)


def commit_and_close(ms: list[Member]) -> None:
    """Once the group is settled (each partition owned once) and everything is consumed:
    every member commits, then every member closes."""
    wait_until(lambda: owns_all_partitions(ms), TIMEOUT_S, lambda: {m.name: sorted(m.assignment) for m in ms}, ms)
    for m in ms:
        m.commit()
    for m in ms:
        m.close()


def consume_commit_and_close(ms: list[Member], total: int) -> None:
    """Wait for `total` records, then commit and close; the members are closed either way."""
    try:
        wait_consumed(ms, total)
        commit_and_close(ms)
    finally:
        for m in ms:
            if m.running:
                m.close()


def assert_exactly_once(records: list[Consumed], per_partition: int) -> None:
    sequences = sequences_by_partition(records)
    assert {p: sorted(s) for p, s in sequences.items()} == {p: list(range(per_partition)) for p in range(PARTITIONS)}


def group_moves_to_kgc_and_back(kafka: str, kgc: str, libraries) -> None:
    """A group of `libraries` consumes and commits at Kafka's coordinator (`kafka`), resumes at
    those offsets through kgc (which adopts the group on first use), and after `kgc export`
    resumes at kgc's offsets back at Kafka."""
    topic = create_topic(kafka, PARTITIONS)
    group = new_name("adopt")
    upstream = settled_members(kafka, group, topic, libraries)
    produce_sequenced(kafka, topic, PARTITIONS, BEFORE)
    wait_consumed(upstream, PARTITIONS * BEFORE)
    commit_and_close(upstream)
    assert committed_offsets(kafka, group) == dict.fromkeys(range(PARTITIONS), BEFORE)

    on_kgc = settled_members(kgc, group, topic, libraries, first=3)
    produce_sequenced(kafka, topic, PARTITIONS, AFTER, first_sequence=BEFORE)
    consume_commit_and_close(on_kgc, PARTITIONS * AFTER)
    assert_exactly_once(consumed(upstream) + consumed(on_kgc), BEFORE + AFTER)
    assert committed_offsets(kgc, group) == dict.fromkeys(range(PARTITIONS), BEFORE + AFTER)
    # The way back: kgc export, then the consumers pointed at Kafka resume at kgc's offsets.
    dry = kgc_command("export", "--upstream", kafka, "--bootstrap-server", kgc, "--group", group)
    assert f"{group}: would commit upstream: " in dry
    assert committed_offsets(kafka, group) == dict.fromkeys(range(PARTITIONS), BEFORE)
    kgc_command("export", "--upstream", kafka, "--bootstrap-server", kgc, "--group", group,
                "--apply")
    assert committed_offsets(kafka, group) == dict.fromkeys(range(PARTITIONS), BEFORE + AFTER)
    # Back on Kafka: the same consumers, subscribed as before, resume at the exported offsets.
    back = settled_members(kafka, group, topic, libraries, first=6)
    produce_sequenced(kafka, topic, PARTITIONS, AFTER, first_sequence=BEFORE + AFTER)
    consume_commit_and_close(back, PARTITIONS * AFTER)
    assert_exactly_once(consumed(upstream) + consumed(on_kgc) + consumed(back), BEFORE + 2 * AFTER)
    assert committed_offsets(kafka, group) == dict.fromkeys(range(PARTITIONS), BEFORE + 2 * AFTER)
