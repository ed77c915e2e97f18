"""Exactly-once applications through three kgc instances on the replicated store, in front
of the suite's real Kafka: a client's transactional offsets are held by whichever instance
owns the group's partition, in the state topic, and a new owner decides them from the
participant partition's marker as the old one would have. Pass: the output read
read_committed holds each input once, and the group's committed offsets are the input
consumed by committed transactions."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from coordinator.partitioning import partition_for
from tests.support import eos
from tests.support.clients import wait_until
from tests.support.kgc_instances import instances, owner_of, serving_broker, shared_by

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 600
LOOK_AGAIN = "telling the client to look its group coordinator up again"


@pytest.fixture(scope="module")
def live(kafka, tmp_path_factory):
    with instances(kafka, tmp_path_factory.mktemp("eos-replicated"), f"kgc-state-{uuid.uuid4().hex[:8]}") as started:
        wait_until(lambda: shared_by(started), 60, lambda: [i.ownership() for i in started])
        yield started


def bootstrap(live) -> str:
    return ",".join(i.address for i in live)


def group_not_owned_by(live, instance) -> str:
    return next(g for g in (f"eos-{uuid.uuid4().hex[:6]}" for _ in range(100)) if owner_of(live, g) is not instance)


def test_confluent_kafka_copies_exactly_once_through_three_instances(live, kafka):
    # given input records, and a group owned by another instance than the one clients reach
    # the transaction coordinator (the broker) through: AddOffsetsToTxn goes to one instance,
    # TxnOffsetCommit to another
    source, target = eos.topics(kafka)
    inputs = eos.seed(kafka.bootstrap, source, RECORDS)
    broker_instance = serving_broker(live, kafka.nodes[0].node_id)
    group = group_not_owned_by(live, broker_instance)
    told_to_look_again = Path(broker_instance.log_path).read_text().count(LOOK_AGAIN)
    # when it copies through every instance, aborting every third transaction and rewinding
    # (with a pause between two transactions, as an application that waits for input)
    done = eos.copy_transactionally(bootstrap(live), group, source, target, RECORDS, abort_every=3,
                                between=lambda transactions, _: time.sleep(4 if transactions == 2 else 0))
    # then every input is in the output once, and the offsets are those of the committed transactions
    assert done["aborted"] > 0
    eos.assert_exactly_once(kafka, bootstrap(live), group, source, target, inputs)
    # and the instance of the transaction coordinator left the copier's connection alone
    # (it closes one only where no TxnOffsetCommit it is due follows, librdkafka#5511)
    assert Path(broker_instance.log_path).read_text().count(LOOK_AGAIN) == told_to_look_again


def test_kafkas_transactional_message_copier_java_client_copies_exactly_once(live, kafka):
    eos.copy_with_kafkas_copier(kafka, bootstrap(live), RECORDS)


def test_a_kafka_streams_exactly_once_v2_application_copies_exactly_once(live, kafka, tmp_path):
    eos.copy_with_streams(kafka, bootstrap(live), tmp_path / "state", RECORDS)


# The copier runs in a process of its own: librdkafka's send_offsets_to_transaction may wait
# past its timeout for the coordinator it dropped (confluentinc/librdkafka#5456), and then
# it is replaced (eos.finish_or_replace) rather than left to hang the run.
@pytest.mark.timeout(300)
def test_kill_9_of_the_owner_while_it_holds_offsets_pending_loses_and_duplicates_nothing(live, kafka, tmp_path):
    # given a copier inside its 4th transaction: its offsets pending at the group's owner
    # (and served by another instance than the broker, the copier's transaction coordinator:
    # librdkafka finds that one by node id in its metadata, which it refreshes only every
    # topic.metadata.refresh.interval.ms, docs/exactly-once.md)
    source, target = eos.topics(kafka)
    inputs = eos.seed(kafka.bootstrap, source, RECORDS)
    group = group_not_owned_by(live, serving_broker(live, kafka.nodes[0].node_id))
    txn_id = f"copier-{uuid.uuid4().hex[:6]}"
    copier = eos.Copier(bootstrap(live), group, source, target, txn_id, RECORDS, tmp_path, "--progress",
                        "--debug", "eos,broker,protocol")
    # when the instance that owns the group's partition is killed before the commit
    killed = owner_of(live, group)
    killed.process.kill()
    live.remove(killed)
    done = eos.finish_or_replace(copier, bootstrap(live), group, source, target, txn_id, RECORDS, timeout_s=90)
    # then another instance took the partition over, decided the held offsets by the
    # transaction's marker, and the copy finished exactly once
    assert done["committed"] == RECORDS
    wait_until(lambda: shared_by(live), 60, lambda: [i.ownership() for i in live])
    heir = owner_of(live, group)
    assert heir is not killed
    # (it did find them undecided, not merely committed later)
    assert f"group partition {partition_for(group)} has undecided transactional offsets" in \
        Path(heir.log_path).read_text()
    eos.assert_exactly_once(kafka, bootstrap(live), group, source, target, inputs)
