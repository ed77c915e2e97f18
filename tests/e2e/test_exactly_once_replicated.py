"""Exactly-once applications through three kgc instances on the replicated store, in front
of the suite's real Kafka: a client's transactional offsets are held by whichever instance
owns the group's partition, in the state topic, and a new owner decides them from the
participant partition's marker as the old one would have. Pass: the output read
read_committed holds each input once, and the group's committed offsets are the input
consumed by committed transactions."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from coordinator.partitioning import partition_for
from tests.e2e.clients import wait_until
from tests.support.eos import committed_offsets, copy_transactionally, read_committed, seed
from tests.support.kgc_instances import instances, owner_of, shared_by

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 600


@pytest.fixture(scope="module")
def live(kafka, tmp_path_factory):
    with instances(kafka, tmp_path_factory.mktemp("eos-replicated"), f"kgc-state-{uuid.uuid4().hex[:8]}") as started:
        wait_until(lambda: shared_by(started), 60, lambda: [i.ownership() for i in started])
        yield started


def bootstrap(live) -> str:
    return ",".join(i.address for i in live)


def topics(kafka) -> tuple[str, str]:
    name = uuid.uuid4().hex[:8]
    return kafka.create_topic(f"in-{name}", 3), kafka.create_topic(f"out-{name}", 3)


def assert_exactly_once(live, kafka, group: str, target: str, source: str, inputs: list[bytes]) -> None:
    output = read_committed(kafka.bootstrap, target, len(inputs))
    duplicates = [v for v, n in Counter(output).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} records copied twice, e.g. {duplicates[:5]}"
    assert sorted(output) == sorted(inputs)
    assert committed_offsets(bootstrap(live), group, source) == [len(inputs) // 3] * 3


def test_confluent_kafka_copies_exactly_once_through_three_instances(live, kafka):
    # given input records and a transactional copier that knows every instance
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    group = f"eos-{uuid.uuid4().hex[:6]}"
    # when it copies, aborting every third transaction and rewinding to the committed offsets
    done = copy_transactionally(bootstrap(live), group, source, target, RECORDS, abort_every=3)
    # then every input is in the output once, and the offsets are those of the committed transactions
    assert done["aborted"] > 0
    assert_exactly_once(live, kafka, group, target, source, inputs)


# librdkafka's send_offsets_to_transaction may not keep its timeout (confluentinc/librdkafka#5456):
# the thread method fails the run instead of hanging it.
@pytest.mark.timeout(240, method="thread")
def test_kill_9_of_the_owner_while_it_holds_offsets_pending_loses_and_duplicates_nothing(live, kafka):
    # given a copier inside its 4th transaction: its offsets pending at the group's owner
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    group = f"eos-{uuid.uuid4().hex[:6]}"
    killed = []

    def kill_the_owner(transactions: int, committed: int) -> None:
        if transactions == 4:
            # when the instance that owns the group's partition is killed before the commit
            owner = owner_of(live, group)
            owner.process.kill()
            live.remove(owner)
            killed.append(owner)

    done = copy_transactionally(bootstrap(live), group, source, target, RECORDS, before_end=kill_the_owner)
    # then another instance took the partition over, decided the held offsets by the
    # transaction's marker, and the copy finished exactly once
    assert killed and done["committed"] == RECORDS
    wait_until(lambda: shared_by(live), 60, lambda: [i.ownership() for i in live])
    heir = owner_of(live, group)
    assert heir is not killed[0]
    # (it did find them undecided, not merely committed later)
    assert f"group partition {partition_for(group)} has undecided transactional offsets" in \
        Path(heir.log_path).read_text()
    assert_exactly_once(live, kafka, group, target, source, inputs)
