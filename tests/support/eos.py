"""Transactional consume-transform-produce through kgc, and the checks of exactly-once.

`copy_transactionally` is the loop exactly-once applications run (librdkafka's
`send_offsets_to_transaction`): consume a few records, produce each to the output in a
transaction, add the consumer's positions to it, commit (or abort, then rewind to the
committed offsets as an application restarting its transaction does).
`python -m tests.support.eos` runs it in a process of its own (`Copier`), for tests that
kill or stop it.
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from coordinator.probe import request_response
from tests.support.kafka import die_with_the_test_run
from tests.support.kgc_http import metrics_of

ROOT = Path(__file__).parents[2]
STREAMS_APP = Path(__file__).parents[1] / "java" / "StreamsEos.java"
JAVA_LOOP = Path(__file__).parents[1] / "java" / "EosCopy.java"


TXN_APIS = ("AddOffsetsToTxn", "TxnOffsetCommit")


def txn_requests(http_port: int) -> Counter[tuple[str, str]]:
    """kgc's transactional request counts by (API, version) so far, from its /metrics."""
    samples = metrics_of(http_port)
    return Counter({(dict(labels)["api"], dict(labels)["version"]): n for (name, labels), n in samples.values.items()
                    if name == "kgc_requests_total" and dict(labels)["api"] in TXN_APIS})


def flows_used(before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]) -> set[str]:
    """Which transaction protocol the requests between two counts took: "v1" (AddOffsetsToTxn,
    then TxnOffsetCommit v0-4), "v2" (TxnOffsetCommit v5+ alone, KIP-890)."""
    grew = {key for key in after if after[key] > before[key]}
    flows = set()
    if any(api == "TxnOffsetCommit" and int(version) >= 5 for api, version in grew):
        flows.add("v2")
    if any(api == "AddOffsetsToTxn" for api, _ in grew) or any(
            api == "TxnOffsetCommit" and int(version) < 5 for api, version in grew):
        flows.add("v1")
    return flows


def advertised_transactions(bootstrap: str) -> tuple[tuple[int, int], dict[str, int]]:
    """An ApiVersions v3 answer from `bootstrap` (kgc or a broker): TxnOffsetCommit's range,
    and the finalized features."""
    host, port = bootstrap.rsplit(":", 1)
    answer = request_response((host, int(port)), ApiVersionsRequest[3](
        client_software_name="kgc-test", client_software_version="1"), ApiVersionsResponse)
    txn = next((k.min_version, k.max_version) for k in answer.api_keys if k.api_key == ApiKey.TxnOffsetCommit)
    return txn, {f.name: f.max_version_level for f in answer.finalized_features}


def seed(bootstrap: str, topic: str, count: int, partitions: int = 3) -> list[bytes]:
    from confluent_kafka import Producer
    values = [b"%d" % i for i in range(count)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(30) == 0
    return values


def copy_transactionally(bootstrap: str, group: str, source: str, target: str, until: int, *,
                         txn_id: str | None = None, abort_every: int = 0, per_transaction: int = 40,
                         timeout_s: float = 120.0, transaction_timeout_ms: int = 30_000,
                         between: Callable[[int, int], None] | None = None,
                         before_end: Callable[[int, int], None] | None = None, debug: str | None = None) -> dict:
    """Copy until `until` records went out in committed transactions; what happened.
    `between(transactions, committed)` runs after each transaction ends; `before_end(transactions,
    committed)` inside each, once its offsets are sent, before it is committed or aborted.
    `debug`: librdkafka's debug contexts for the producer (its log goes to stderr)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "session.timeout.ms": 10_000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id or f"copier-{uuid.uuid4()}",
                         "transaction.timeout.ms": transaction_timeout_ms, **({"debug": debug} if debug else {})})
    producer.init_transactions(30)
    consumer.subscribe([source])
    committed = aborted = transactions = failed = 0
    deadline = time.monotonic() + timeout_s

    def abort_and_rewind() -> None:
        producer.abort_transaction(30)
        # Back to what the group committed: the aborted offsets must not be there.
        for tp in consumer.committed(consumer.assignment(), 30):
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    try:
        while committed < until:
            assert time.monotonic() < deadline, f"copied {committed} of {until} in {timeout_s}s"
            records = [r for r in consumer.consume(per_transaction, 1.0) if r.error() is None]
            if not records:
                continue
            producer.begin_transaction()
            for record in records:
                producer.produce(target, record.value())
            positions = consumer.position(consumer.assignment())
            try:
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            except KafkaException as exc:
                # librdkafka's contract: an abortable error (a coordinator lost midway, say)
                # ends the transaction, which the application aborts and starts again.
                if not exc.args[0].txn_requires_abort():
                    raise
                failed += 1
                abort_and_rewind()
                continue
            transactions += 1
            if before_end is not None:
                # Delivered first: a hook that holds the copier then holds only its
                # EndTxn (records still queued would time out while it is stopped).
                assert producer.flush(30) == 0
                before_end(transactions, committed)
            if abort_every and transactions % abort_every == 0:
                abort_and_rewind()
                aborted += len(records)
            else:
                producer.commit_transaction(30)
                committed += len(records)
            if between is not None:
                between(transactions, committed)
    finally:
        consumer.close()
    return {"committed": committed, "aborted": aborted, "transactions": transactions, "failed": failed}


def read_committed(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[bytes]:
    """Every record of `topic` a read_committed consumer sees (polled until `expected` and a
    little more, so duplicates past the count show up too)."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            batch = [r.value() for r in consumer.consume(500, 0.5) if r.error() is None]
            values += batch
            if len(values) >= expected:
                quiet_until = quiet_until or time.monotonic() + 2.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return values


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int = 3) -> list[int]:
    """The group's committed offsets, asked as a read_committed client asks (require_stable)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)]
    finally:
        consumer.close()


def topics(kafka, partitions: int = 3) -> tuple[str, str]:
    """A new input and output topic."""
    name = uuid.uuid4().hex[:8]
    return kafka.create_topic(f"in-{name}", partitions), kafka.create_topic(f"out-{name}", partitions)


def assert_exactly_once(kafka, bootstrap: str, group: str, source: str, target: str, inputs: list[bytes],
                        partitions: int = 3) -> None:
    """The output, read read_committed upstream, holds each input once, and the group's
    offsets asked through `bootstrap` (kgc) are the whole input."""
    output = read_committed(kafka.bootstrap, target, len(inputs))
    duplicates = [v for v, n in Counter(output).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} records copied twice, e.g. {duplicates[:5]}"
    assert sorted(output) == sorted(inputs)
    assert committed_offsets(bootstrap, group, source, partitions) == [len(inputs) // partitions] * partitions


def copy_with_kafkas_copier(kafka, bootstrap: str, records: int, during: Callable[[], None] | None = None, *,
                            transaction_size: int = 50, random_aborts: bool = True) -> float:
    """Kafka's own system-test workload (the Java client, with random aborts unless told
    otherwise) copies through `bootstrap`, exactly once; the copier's wall time, its JVM's
    start included. `during()` runs while the copier does (a fault, say)."""
    from tests.support.kafka_dist import java_command
    source, target = topics(kafka, 1)
    inputs = seed(kafka.bootstrap, source, records, partitions=1)
    group = f"copier-{uuid.uuid4().hex[:8]}"
    command = java_command("org.apache.kafka.tools.TransactionalMessageCopier", "--broker-list", bootstrap,
                           "--transactional-id", group, "--consumer-group", group, "--input-topic", source,
                           "--input-partition", "0", "--output-topic", target, "--transaction-size",
                           str(transaction_size), "--max-messages", str(records), "--use-group-metadata",
                           *(("--enable-random-aborts",) if random_aborts else ()))
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as copier:
        try:
            if during is not None:
                during()
            stdout, stderr = copier.communicate(timeout=180)
        finally:
            if copier.poll() is None:
                copier.kill()
    elapsed = time.perf_counter() - started
    assert copier.returncode == 0, stdout[-2000:] + stderr[-2000:]
    assert '"remaining":0' in stdout.replace(" ", "")
    assert_exactly_once(kafka, bootstrap, group, source, target, inputs, partitions=1)
    return elapsed


def run_streams(bootstrap: str, application: str, source: str, target: str, records: int, state_dir: Path,
                group_protocol: str = "classic", timeout_s: float = 300) -> subprocess.CompletedProcess:
    """tests/java/StreamsEos.java: copies `records` from `source` to `target` through
    `bootstrap`, on Streams' `group_protocol`."""
    from tests.support.kafka_dist import compiled, java_command
    return subprocess.run(java_command("StreamsEos", bootstrap, application, source, target, str(records),
                                       str(state_dir), group_protocol, cp=compiled(STREAMS_APP)),
                          capture_output=True, text=True, timeout=timeout_s)


def copy_with_streams(kafka, bootstrap: str, state_dir: Path, records: int) -> None:
    """A Kafka Streams exactly_once_v2 application (tests/java/StreamsEos.java) copies
    through `bootstrap`, exactly once."""
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, records)
    application = f"streams-{uuid.uuid4().hex[:8]}"
    done = run_streams(bootstrap, application, source, target, records, state_dir)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"processed {records}" in done.stdout
    assert_exactly_once(kafka, bootstrap, application, source, target, inputs)


def copy_with_java_loop(kafka, bootstrap: str, records: int, group_protocol: str, abort_every: int = 3) -> None:
    """The Java client's consume-transform-produce loop (tests/java/EosCopy.java), aborting
    and rewinding every `abort_every`-th transaction, copies through `bootstrap`, exactly once."""
    from tests.support.kafka_dist import compiled, java_command
    source, target = topics(kafka)
    inputs = seed(kafka.bootstrap, source, records)
    group = f"java-loop-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(java_command("EosCopy", bootstrap, group, source, target, str(records), group_protocol,
                                       str(abort_every), cp=compiled(JAVA_LOOP)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    copied, aborted = (int(n) for n in done.stdout.split()[1::2][:2])
    assert copied == records and aborted > 0, done.stdout
    assert_exactly_once(kafka, bootstrap, group, source, target, inputs)


class Copier:
    """`main` in a child process, stopped inside its `hold_in`th transaction (offsets sent,
    not committed): `committed` is what it had committed before. `resume()` lets it go on;
    `lines` are what it prints from then on, read as they come."""

    def __init__(self, bootstrap: str, group: str, source: str, target: str, txn_id: str, until: int,
                 directory: Path, *flags: str, hold_in: int = 4):
        self.err_path = directory / f"{txn_id}.err"
        with open(self.err_path, "w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.eos", bootstrap, group, source, target, txn_id, str(until),
                 "--hold-in", str(hold_in), *flags], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, preexec_fn=die_with_the_test_run)
        holding = self.process.stdout.readline()
        assert holding, self.err_path.read_text()[-2000:]
        self.committed: int = json.loads(holding)["committed"]
        self.lines: queue.Queue[dict] = queue.Queue()

    def resume(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(json.loads(line))


def finish_or_replace(copier: Copier, bootstrap: str, group: str, source: str, target: str, txn_id: str,
                      until: int, timeout_s: float) -> dict:
    """What `copier` (started with --progress) did once resumed, or, if it has not finished in
    `timeout_s`, what a new copier with its transactional id did after it was killed, as a
    supervisor restarts an application whose producer call hangs: librdkafka's
    send_offsets_to_transaction may wait past its own timeout for a coordinator it has
    dropped (confluentinc/librdkafka#5456). The new copier fences the old producer and
    aborts its open transaction, so exactly-once must hold across the two as well."""
    copier.resume()
    committed, deadline = copier.committed, time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = copier.lines.get(timeout=left)
        except queue.Empty:
            break
        if "transactions" in line:
            copier.process.wait(30)
            return line
        committed = line["committed"]
    copier.process.kill()
    copier.process.wait(30)
    # Shown in the run's warnings summary: a hang this often is worth reading its log for.
    warnings.warn(f"copier {txn_id} hung past {timeout_s:.0f}s after {committed} records: replaced "
                  f"(its librdkafka log: {copier.err_path})", stacklevel=2)
    done = copy_transactionally(bootstrap, group, source, target, until - committed, txn_id=txn_id, timeout_s=90)
    return {**done, "committed": committed + done["committed"]}


def main(argv: list[str]) -> int:
    """The copy in a process of its own. With --hold-in N it stops inside its Nth
    transaction, offsets sent and not committed, prints {"holding": N, "committed": records
    committed before} and waits for a line on stdin (the test kills it, or stops and
    resumes it, meanwhile); then it commits and goes on. With --progress it prints
    {"committed": records} after each transaction. Prints what happened."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.eos")
    for name in ("bootstrap", "group", "source", "target", "txn_id"):
        parser.add_argument(name)
    parser.add_argument("until", type=int)
    parser.add_argument("--hold-in", type=int, default=0)
    parser.add_argument("--transaction-timeout-ms", type=int, default=30_000)
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--debug", help="librdkafka's debug contexts for the producer (logged to stderr)")
    args = parser.parse_args(argv)

    def hold(transactions: int, committed: int) -> None:
        if transactions == args.hold_in:
            print(json.dumps({"holding": transactions, "committed": committed}), flush=True)
            sys.stdin.readline()

    def progress(transactions: int, committed: int) -> None:
        if transactions >= args.hold_in:    # the first line is the hold's
            print(json.dumps({"committed": committed}), flush=True)

    done = copy_transactionally(args.bootstrap, args.group, args.source, args.target, args.until, txn_id=args.txn_id,
                                transaction_timeout_ms=args.transaction_timeout_ms, before_end=hold,
                                between=progress if args.progress else None, debug=args.debug)
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
