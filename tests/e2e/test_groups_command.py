"""`kgc groups` against real groups: a kafka-python consumer group through kgc in front of Kafka.

Records are produced one per batch (a flush after each), so the same tests hold in front of
Tansu, whose ListOffsets "latest" is the base offset of the last batch + 1 (tests/support/tansu.py).
The lag `describe` prints is checked against the consumer's own position after it has read
everything (the true log end), minus what it committed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.support.admin import committed_offsets, create_topic, new_name
from tests.support.clients import commit_through_rejoin
from tests.support.consumer_lag import (
    PER_PARTITION,
    commit_past_the_end,
    joined_consumer,
    produce_one_per_batch,
    read_everything,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", "groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def rows(output: str) -> dict[int, list[str]]:
    """describe's table: partition -> the row's cells."""
    found = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[2].isdigit():
            found[int(cells[2])] = cells
    return found


def test_describe_shows_lag_as_the_consumers_position_minus_its_committed_offset(kgc):
    topic = create_topic(kgc.bootstrap, len(PER_PARTITION))
    produce_one_per_batch(kgc.bootstrap, topic, PER_PARTITION)
    group = new_name("lag")
    consumer = joined_consumer(kgc.bootstrap, topic, group)
    try:
        positions = read_everything(consumer, topic)
        assert positions == dict(enumerate(PER_PARTITION))
        committed = {0: 1, 1: 4, 2: 5}
        commit_through_rejoin(consumer, {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                                         for p, o in committed.items()})
        described = groups(kgc.bootstrap, "describe", group, "--members")
        assert described.returncode == 0, described.stderr
        table = rows(described.stdout)
        for p, position in positions.items():
            _, t, _, current, log_end, lag, *_ = table[p]
            assert (t, int(current), int(log_end), int(lag)) == (topic, committed[p], position, position - committed[p])
        assert "Stable with 1 member(s)" in described.stdout
    finally:
        consumer.close()


def test_lag_is_unknown_not_negative_when_the_commit_is_past_the_log_end(kgc):
    topic, group = commit_past_the_end(kgc.bootstrap)
    described = groups(kgc.bootstrap, "describe", group)
    assert described.returncode == 0, described.stderr
    [row] = rows(described.stdout).values()
    assert row[5] == "-*", described.stdout
    assert "lag unknown: committed offset 8 is past the log end offset 5" in described.stdout


def test_reset_offsets_is_refused_for_a_group_with_members_and_a_dry_run_changes_nothing(kgc):
    topic = create_topic(kgc.bootstrap, len(PER_PARTITION))
    produce_one_per_batch(kgc.bootstrap, topic, PER_PARTITION)
    group = new_name("reset")
    consumer = joined_consumer(kgc.bootstrap, topic, group)
    try:
        read_everything(consumer, topic)
        commit_through_rejoin(consumer)
        before = committed_offsets(kgc.bootstrap, group)
        assert before == dict(enumerate(PER_PARTITION))
        refused = groups(kgc.bootstrap, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert "refusing to reset offsets of group" in refused.stderr and "Stable" in refused.stderr
        assert committed_offsets(kgc.bootstrap, group) == before
    finally:
        consumer.close()
    dry = groups(kgc.bootstrap, "reset-offsets", group, "--topic", topic, "--shift-by", "-2")
    assert dry.returncode == 0, dry.stderr
    assert "Dry run: nothing changed" in dry.stdout
    assert committed_offsets(kgc.bootstrap, group) == before
    shifted = groups(kgc.bootstrap, "reset-offsets", group, "--topic", topic, "--shift-by", "-2", "--execute")
    assert shifted.returncode == 0, shifted.stderr
    assert committed_offsets(kgc.bootstrap, group) == {p: n - 2 for p, n in enumerate(PER_PARTITION)}
    to_offset = groups(kgc.bootstrap, "reset-offsets", group, "--topic", f"{topic}:1", "--to-offset", "99",
                       "--execute")
    assert to_offset.returncode == 0, to_offset.stderr
    assert committed_offsets(kgc.bootstrap, group)[1] == PER_PARTITION[1]   # clamped to the log end
    earliest = groups(kgc.bootstrap, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
    assert earliest.returncode == 0, earliest.stderr
    assert committed_offsets(kgc.bootstrap, group) == {p: 0 for p in range(len(PER_PARTITION))}
    deleted_offsets = groups(kgc.bootstrap, "delete-offsets", group, "--topic", f"{topic}:0")
    assert deleted_offsets.returncode == 0, deleted_offsets.stderr
    assert set(committed_offsets(kgc.bootstrap, group)) == {1, 2}
    listed = groups(kgc.bootstrap, "list")
    assert any(line.split()[:2] == [group, "Empty"] for line in listed.stdout.splitlines()), listed.stdout
    deleted = groups(kgc.bootstrap, "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    assert committed_offsets(kgc.bootstrap, group) == {}


def test_list_shows_each_group_once_though_every_broker_listener_answers(kgc):
    # Metadata names kgc's own node and the broker's listener; both answer ListGroups with
    # the same groups, as every broker of a cluster answers for its own. Kafka's
    # `kafka-consumer-groups --list` shows each group once, and so must `kgc groups list`.
    _, group = commit_past_the_end(kgc.bootstrap)
    listed = groups(kgc.bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert names.count(group) == 1, listed.stdout
    assert len(names) == len(set(names)), listed.stdout
