"""Exactly-once through kgc while the upstream loses a broker, on the three-node cluster
(replication factor 3, min ISR 2): the broker leading the group's participant partition is
SIGKILLed inside a transaction, after the copier's offsets are pending at kgc and before its
commit, and restarted a few transactions later. The transaction coordinator writes the
marker to the partition's new leader, and kgc's tail follows it there (coordinator/txn).
Pass: each input once in the output read read_committed, and the group's offsets at the end
of the input."""

from __future__ import annotations

import uuid

import pytest

from coordinator.partitioning import partition_for
from coordinator.txn.participant import DEFAULT_TOPIC
from tests.support import eos
from tests.support.kafka import partition_leader
from tests.support.kgc import kgc_in_front_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 600
KILL_IN, RESTART_AFTER = 3, 6      # transactions


# librdkafka's send_offsets_to_transaction may not keep its timeout (confluentinc/librdkafka#5456):
# the thread method fails the run instead of hanging it.
@pytest.mark.timeout(300, method="thread")
def test_the_participant_partitions_leader_killed_mid_transaction_loses_and_duplicates_nothing(kafka3, tmp_path):
    source, target = eos.topics(kafka3)
    inputs = eos.seed(kafka3.bootstrap, source, RECORDS)
    group = f"eos-bounce-{uuid.uuid4().hex[:6]}"
    killed: list[int] = []
    with kgc_in_front_of(kafka3, "--data-dir", str(tmp_path / "data"), log_path=str(tmp_path / "kgc.log")) as kgc:

        def kill_the_leader(transactions: int, committed: int) -> None:
            if transactions == KILL_IN:
                # the copier's offsets are pending at kgc; its EndTxn comes next
                victim = partition_leader(kafka3.bootstrap, DEFAULT_TOPIC, partition_for(group))
                kafka3.kill_node(victim)
                killed.append(victim)

        def restart(transactions: int, committed: int) -> None:
            if transactions == KILL_IN + RESTART_AFTER and killed:
                kafka3.start_node(killed[0])

        try:
            done = eos.copy_transactionally(kgc.bootstrap, group, source, target, RECORDS, abort_every=4,
                                            before_end=kill_the_leader, between=restart, timeout_s=240)
        finally:
            for node_id in killed:
                if not kafka3.node(node_id).running:
                    kafka3.start_node(node_id)
        assert killed, "the copier never reached the transaction the leader was to die in"
        assert done["committed"] == RECORDS
        eos.assert_exactly_once(kafka3, kgc.bootstrap, group, source, target, inputs)
