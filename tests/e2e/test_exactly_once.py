"""Exactly-once applications through kgc, in front of a real Kafka 4.4 broker: kgc serves
TxnOffsetCommit, and learns each transaction's outcome from its participant partition
(coordinator/txn). Pass: the output read read_committed holds each input exactly once,
and the group's committed offsets are the input consumed by committed transactions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter

import pytest

from tests.support.eos import (
    Copier,
    advertised_transactions,
    assert_exactly_once,
    copy_transactionally,
    copy_with_java_loop,
    copy_with_kafkas_copier,
    copy_with_streams,
    flows_used,
    run_streams,
    seed,
    topics,
    txn_requests,
)
from tests.support.eos_python import copy_with_aiokafka, copy_with_kafka_python
from tests.support.kafka import KafkaCluster, die_with_the_test_run
from tests.support.kafkajs import JS_DIR
from tests.support.kgc import KgcProcess, wait_listening
from tests.support.kgc_http import metrics_of
from tests.support.ports import free_port_on

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 600


class RestartableKgc:
    """kgc in front of the session's broker with a data dir, killable and restartable on
    the same ports (clients keep their bootstrap and broker addresses)."""

    def __init__(self, kafka, directory):
        self.kafka = kafka
        self.directory = directory
        self.port = free_port_on(("127.0.0.1",))
        self.broker_ports = {node.node_id: free_port_on(("127.0.0.1",)) for node in kafka.nodes}
        self.http_port = free_port_on(("127.0.0.1",))
        self.proc: KgcProcess | None = None

    def start(self) -> KgcProcess:
        brokers = [a for node_id, port in self.broker_ports.items() for a in ("--broker-port", f"{node_id}={port}")]
        # A test timing out with the thread method ends pytest at once: kgc must die with it.
        self.proc = KgcProcess("--upstream", self.kafka.bootstrap, *brokers, "--data-dir", str(self.directory / "data"),
                               "--http-port", str(self.http_port),
                               port=self.port, log_path=str(self.directory / "kgc.log"),
                               popen={"preexec_fn": die_with_the_test_run}).start()
        for port in self.broker_ports.values():
            wait_listening(port, 30)
        return self.proc

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self) -> Counter[tuple[str, str]]:
        return txn_requests(self.http_port)

    def advertised(self) -> tuple[tuple[int, int], dict[str, int]]:
        return advertised_transactions(self.bootstrap)


@pytest.fixture(scope="module")
def eos_kgc(kafka, tmp_path_factory):
    front = RestartableKgc(kafka, tmp_path_factory.mktemp("eos-kgc"))
    front.start()
    yield front
    front.proc.stop()


def test_confluent_kafka_copies_exactly_once_with_aborted_transactions_rewound(eos_kgc, kafka):
    # given input records and a transactional copier (librdkafka: AddOffsetsToTxn, TxnOffsetCommit v3)
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    group = f"eos-{uuid.uuid4().hex[:6]}"
    before, markers = eos_kgc.requests(), metrics_of(eos_kgc.http_port)
    # when it copies through kgc, aborting every third transaction and rewinding to the committed offsets
    done = copy_transactionally(eos_kgc.bootstrap, group, source, target, RECORDS, abort_every=3)
    # then every input is in the output once, and the offsets are those of the committed transactions
    assert done["aborted"] > 0
    assert_exactly_once(kafka, eos_kgc.bootstrap, group, source, target, inputs)
    # librdkafka knows only the classic flow, whatever the upstream finalized
    assert flows_used(before, eos_kgc.requests()) == {"v1"}
    # and kgc's metrics count the transactions its markers decided, each kind
    after = metrics_of(eos_kgc.http_port)
    for marker, transactions in (("abort", done["transactions"] // 3), ("commit", 1)):
        grew = after.get("kgc_txn_markers_total", marker=marker) - markers.get("kgc_txn_markers_total", marker=marker)
        assert grew >= transactions, (marker, grew)


def copy_with_kafkajs(node: str, bootstrap: str, group: str, source: str, target: str, until: int) -> dict:
    run = subprocess.run([node, "eos.mjs", bootstrap, source, target, group, str(until)],
                         cwd=JS_DIR, capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "kafkajs"])
def test_the_other_clients_copy_exactly_once_with_aborted_transactions_rewound(eos_kgc, kafka, client, request):
    # given input records and a transactional copier of each library with one (AddOffsetsToTxn,
    # then TxnOffsetCommit: v3 from kafka-python, v0 from aiokafka with no member, v1 from kafkajs)
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    group = f"eos-{client}-{uuid.uuid4().hex[:6]}"
    before = eos_kgc.requests()
    # when it copies through kgc, aborting every third transaction and rewinding to the
    # committed offsets kgc gives back
    if client == "kafkajs":
        done = copy_with_kafkajs(request.getfixturevalue("node"), eos_kgc.bootstrap, group, source, target, RECORDS)
    else:
        copy = copy_with_kafka_python if client == "kafka-python" else copy_with_aiokafka
        done = copy(eos_kgc.bootstrap, group, source, target, RECORDS, timeout_s=90)
    # then every input is in the output once, and the offsets are those of the committed transactions
    assert done["aborted"] > 0 and done["committed"] >= RECORDS
    assert_exactly_once(kafka, eos_kgc.bootstrap, group, source, target, inputs)
    assert flows_used(before, eos_kgc.requests()) == {"v1"}


# A regression here hangs in librdkafka's send_offsets_to_transaction (its timeout is not
# kept, confluentinc/librdkafka#5456), where pytest's signal can never land: the thread
# method fails the run instead.
@pytest.mark.timeout(180, method="thread")
def test_kill_9_of_kgc_mid_copy_loses_and_duplicates_nothing(eos_kgc, kafka):
    # given a copier part-way through
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    group = f"eos-{uuid.uuid4().hex[:6]}"

    def crash_once(transactions: int, committed: int) -> None:
        if transactions == 4:
            # when kgc is killed between transactions and started again on the same ports and data dir
            eos_kgc.proc.kill()
            eos_kgc.start()

    done = copy_transactionally(eos_kgc.bootstrap, group, source, target, RECORDS, between=crash_once)
    # then the copy finishes exactly once
    assert done["committed"] == RECORDS
    assert_exactly_once(kafka, eos_kgc.bootstrap, group, source, target, inputs)


def wait_aborted(kafka, txn_id: str, timeout_s: float = 60.0) -> None:
    """Until the upstream's transaction coordinator has aborted the id's open transaction."""
    deadline = time.monotonic() + timeout_s
    while "CompleteAbort" not in (described := kafka.admin_tool(
            "org.apache.kafka.tools.TransactionsCommand", "describe", "--transactional-id", txn_id).stdout):
        assert time.monotonic() < deadline, described
        time.sleep(1.0)


@pytest.mark.timeout(180)
def test_kill_9_of_a_copier_mid_transaction_then_a_new_one_with_its_id_copies_exactly_once(eos_kgc, kafka, tmp_path):
    # given a copier killed inside a transaction whose offsets kgc holds pending
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    name = uuid.uuid4().hex[:6]
    group, txn_id = f"eos-{name}", f"copier-{name}"
    copier = Copier(eos_kgc.bootstrap, group, source, target, txn_id, RECORDS, tmp_path)
    committed = copier.committed
    copier.process.kill()
    copier.process.wait()
    # when a new copier with its transactional id takes over: its InitProducerId fences the
    # old producer and aborts that transaction, whose ABORT marker must drop the offsets
    done = copy_transactionally(eos_kgc.bootstrap, group, source, target, RECORDS - committed, txn_id=txn_id,
                                timeout_s=60)
    # then it copies the rest, from the offsets of the committed transactions, exactly once
    assert done["committed"] == RECORDS - committed
    assert_exactly_once(kafka, eos_kgc.bootstrap, group, source, target, inputs)


@pytest.mark.timeout(180)
def test_a_zombie_copier_stopped_past_its_transaction_timeout_is_fenced_and_duplicates_nothing(eos_kgc, kafka,
                                                                                                 tmp_path):
    # given a copier stopped inside a transaction whose offsets kgc holds pending, until the
    # upstream aborts it for its transaction.timeout.ms (bumping the producer's epoch)
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    name = uuid.uuid4().hex[:6]
    group, txn_id = f"eos-{name}", f"copier-{name}"
    copier = Copier(eos_kgc.bootstrap, group, source, target, txn_id, RECORDS, tmp_path,
                    "--transaction-timeout-ms", "5000")
    zombie, committed = copier.process, copier.committed
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        wait_aborted(kafka, txn_id)
        # when a new instance with its transactional id copies the rest
        done = copy_transactionally(eos_kgc.bootstrap, group, source, target, RECORDS - committed, txn_id=txn_id,
                                    timeout_s=60)
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    # and the zombie wakes up and commits its transaction
    zombie.communicate("\n", timeout=60)
    # then the zombie is fenced, and every input is in the output once
    assert zombie.returncode != 0
    assert "fenced" in (tmp_path / f"{txn_id}.err").read_text().lower()
    assert done["committed"] == RECORDS - committed
    assert_exactly_once(kafka, eos_kgc.bootstrap, group, source, target, inputs)


# A regression may hang in librdkafka, as the kill -9 test above.
@pytest.mark.timeout(240, method="thread")
def test_a_marker_written_while_kgc_is_down_decides_the_offsets_it_held_pending(eos_kgc, kafka, tmp_path):
    """The marker of a transaction reaches kgc only after a kill -9 and restart, for sure: the
    COMMIT of a client's EndTxn cannot be held back (kgc forwards the EndTxn, and the upstream
    writes the marker milliseconds after), but the ABORT of a transaction timeout can."""
    # given offsets kgc holds pending for a copier's open transaction
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, RECORDS)
    name = uuid.uuid4().hex[:6]
    group, txn_id = f"eos-{name}", f"copier-{name}"
    copier = Copier(eos_kgc.bootstrap, group, source, target, txn_id, RECORDS, tmp_path,
                    "--transaction-timeout-ms", "5000")
    committed = copier.committed
    # when kgc is killed, the copier too, and the upstream aborts the transaction (its
    # timeout) while kgc is down, before kgc starts again
    eos_kgc.proc.kill()
    copier.process.kill()
    copier.process.wait()
    wait_aborted(kafka, txn_id)
    eos_kgc.start()
    # then kgc reads the ABORT from its participant partition and drops the offsets: a new
    # copier with the transactional id copies the rest exactly once
    done = copy_transactionally(eos_kgc.bootstrap, group, source, target, RECORDS - committed, txn_id=txn_id,
                                timeout_s=60)
    assert done["committed"] == RECORDS - committed
    assert_exactly_once(kafka, eos_kgc.bootstrap, group, source, target, inputs)


def test_kgc_offers_the_transaction_version_the_upstream_finalized(eos_kgc):
    # Kafka 4.4 formats a new cluster with transaction.version 2 (KIP-890 part 2)
    txn_offset_commit, features = eos_kgc.advertised()
    assert features.get("transaction.version") == 2
    assert txn_offset_commit == (0, 6)


def test_kafkas_transactional_message_copier_java_client_copies_exactly_once(eos_kgc, kafka):
    """Kafka's own system-test workload (the Java client), with random aborts. kgc passes the
    upstream's `transaction.version` 2 on, so the client takes KIP-890's flow: no
    AddOffsetsToTxn, TxnOffsetCommit v5+ (v6 names topics by id), whose participant write has
    the upstream add kgc's partition to the transaction."""
    before = eos_kgc.requests()
    copy_with_kafkas_copier(kafka, eos_kgc.bootstrap, RECORDS)
    after = eos_kgc.requests()
    assert flows_used(before, after) == {"v2"}
    assert after["TxnOffsetCommit", "6"] > before["TxnOffsetCommit", "6"]     # Kafka 4.4's client: by topic id


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_the_java_clients_own_consume_transform_produce_loop_copies_exactly_once(eos_kgc, kafka, group_protocol):
    """sendOffsetsToTransaction(offsets, consumer.groupMetadata()) from a subscribed Java
    consumer of either group protocol (KIP-848: the member epoch fences a zombie), every third
    transaction aborted and rewound to what the group committed, which the read_committed
    consumer asks with require_stable (UNSTABLE_OFFSET_COMMIT until the abort's marker)."""
    before = eos_kgc.requests()
    copy_with_java_loop(kafka, eos_kgc.bootstrap, RECORDS, group_protocol)
    assert flows_used(before, eos_kgc.requests()) == {"v2"}


def test_a_kafka_streams_exactly_once_v2_application_copies_exactly_once(eos_kgc, kafka, tmp_path):
    """Kafka Streams (exactly_once_v2, classic group protocol, 100 ms commits): its
    sendOffsetsToTransaction goes to kgc with the group's generation and member."""
    before = eos_kgc.requests()
    copy_with_streams(kafka, eos_kgc.bootstrap, tmp_path / "state", RECORDS)
    assert flows_used(before, eos_kgc.requests()) == {"v2"}


def test_a_kafka_streams_application_on_the_streams_group_protocol_stops_with_its_clients_own_error(
        eos_kgc, kafka, tmp_path):
    """KIP-1071's streams groups are not served (README, "Limits"): kgc's ApiVersions does
    not offer StreamsGroupHeartbeat, so a Streams application with `group.protocol=streams`
    stops at its first heartbeat with the Java client's own message, rather than waiting or
    forming half a group on each side."""
    source, target = topics(kafka)
    seed(kafka.bootstrap, source, 10)
    done = run_streams(eos_kgc.bootstrap, f"streams-protocol-{uuid.uuid4().hex[:8]}", source, target, 10,
                       tmp_path / "state", group_protocol="streams", timeout_s=120)
    # exit 2 is the application's own failure path; its wait for the records is 240 s
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    assert "The cluster does not support the STREAMS group protocol" in done.stdout, done.stdout[-2000:]


@pytest.mark.timeout(300)
def test_kill_9_of_kgc_mid_copy_by_the_java_client_on_transaction_version_2_loses_and_duplicates_nothing(
        eos_kgc, kafka):
    """The KIP-890 flow under the fault: kgc killed -9 while Kafka's copier (TxnOffsetCommit
    v6, no AddOffsetsToTxn) runs, and started again on the same ports and data dir."""
    before = eos_kgc.requests()

    def crash_mid_copy() -> None:
        deadline = time.monotonic() + 60
        while eos_kgc.requests()["TxnOffsetCommit", "6"] - before["TxnOffsetCommit", "6"] < 5:
            assert time.monotonic() < deadline, "the copier committed nothing through kgc"
            time.sleep(0.05)
        eos_kgc.proc.kill()
        eos_kgc.start()

    copy_with_kafkas_copier(kafka, eos_kgc.bootstrap, RECORDS * 5, during=crash_mid_copy)
    # the restarted kgc (its counts start at zero) served the rest in the same flow
    assert flows_used(Counter(), eos_kgc.requests()) == {"v2"}


# ---- an upstream on transaction version 1 ------------------------------------------------


@pytest.fixture(scope="module")
def kgc_tv1(tmp_path_factory):
    """kgc in front of a Kafka 4.4 formatted with `transaction.version=0`: as a cluster
    upgraded from 3.x that has not finalized KIP-890 yet."""
    directory = tmp_path_factory.mktemp("eos-tv1")
    with KafkaCluster(directory / "kafka", features=("transaction.version=0",)) as cluster:
        front = RestartableKgc(cluster, directory)
        front.start()
        try:
            yield front
        finally:
            front.proc.stop()


def test_before_transaction_version_2_the_java_client_and_streams_take_the_classic_flow(kgc_tv1, tmp_path):
    # given an upstream without transaction.version 2: kgc offers TxnOffsetCommit v0-4 only
    txn_offset_commit, features = kgc_tv1.advertised()
    assert features.get("transaction.version", 0) < 2
    assert txn_offset_commit == (0, 4)
    before = kgc_tv1.requests()
    # when Kafka's copier and a Streams application copy through kgc
    copy_with_kafkas_copier(kgc_tv1.kafka, kgc_tv1.bootstrap, RECORDS)
    copy_with_streams(kgc_tv1.kafka, kgc_tv1.bootstrap, tmp_path / "state", RECORDS)
    # then both copied exactly once (checked inside), through AddOffsetsToTxn and TxnOffsetCommit v0-4
    assert flows_used(before, kgc_tv1.requests()) == {"v1"}
