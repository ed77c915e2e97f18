"""Transactions per second of a consume-transform-produce loop, through kgc and against
Kafka's own group coordinator, in one run on one real Kafka broker.

`--client librdkafka` (confluent-kafka, transaction version 1: AddOffsetsToTxn, then
TxnOffsetCommit) or `--client java` (Kafka's TransactionalMessageCopier, transaction version 2
as the broker finalized it: TxnOffsetCommit v6 alone; its JVM's start is in its time, on
every side alike).

Each side copies the same number of records with `--per-transaction` records per
transaction (consume, produce, `send_offsets_to_transaction`, commit), one transaction in
flight, as exactly-once applications run. Through kgc a transaction also pays kgc's
participant record upstream (one acks=all Produce) and the tail's round before the
TxnOffsetCommit answer; on the replicated store (several instances' store, here one
instance) the pending offsets and the transaction's end are each an upstream transaction of
kgc's own, instead of an fsync.

    .venv/bin/python -m tests.bench.eos_throughput --records 3000 --per-transaction 10
    .venv/bin/python -m tests.bench.eos_throughput --client java --records 20000 --per-transaction 10

A benchmark tool, not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from tests.support.eos import copy_transactionally, copy_with_kafkas_copier, seed
from tests.support.kafka import KafkaCluster
from tests.support.kgc import kgc_in_front_of


def one_side(client: str, bootstrap: str, kafka: KafkaCluster, records: int, per_transaction: int
             ) -> tuple[float, int]:
    if client == "java":
        elapsed = copy_with_kafkas_copier(kafka, bootstrap, records, transaction_size=per_transaction,
                                          random_aborts=False)
        transactions = -(-records // per_transaction)
        return transactions / elapsed, transactions
    name = uuid.uuid4().hex[:8]
    source, target = kafka.create_topic(f"in-{name}", 3), kafka.create_topic(f"out-{name}", 3)
    seed(kafka.bootstrap, source, records)
    started = time.perf_counter()
    done = copy_transactionally(bootstrap, f"bench-{name}", source, target, records,
                                per_transaction=per_transaction, timeout_s=600)
    elapsed = time.perf_counter() - started
    return done["transactions"] / elapsed, done["transactions"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--per-transaction", type=int, default=10)
    parser.add_argument("--client", choices=("librdkafka", "java"), default="librdkafka")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, KafkaCluster(Path(tmp) / "kafka", few_threads=False) as kafka:
        # A warm-up first: a broker just started creates `__consumer_offsets` and loads its
        # transaction log on first use, which must not be charged to the side measured first.
        one_side(args.client, kafka.bootstrap, kafka, args.per_transaction * 20, args.per_transaction)
        direct, direct_n = one_side(args.client, kafka.bootstrap, kafka, args.records, args.per_transaction)
        with kgc_in_front_of(kafka, "--data-dir", str(Path(tmp) / "kgc-data"), log_path=str(Path(tmp) / "kgc.log")) as kgc:
            through, through_n = one_side(args.client, kgc.bootstrap, kafka, args.records, args.per_transaction)
        replicated = ("--store", "replicated", "--state-topic", f"kgc-state-{uuid.uuid4().hex[:8]}",
                      "--state-topic-replication-factor", "1", "--state-topic-min-insync-replicas", "1")
        with kgc_in_front_of(kafka, *replicated, log_path=str(Path(tmp) / "kgc-replicated.log")) as kgc:
            shared, shared_n = one_side(args.client, kgc.bootstrap, kafka, args.records, args.per_transaction)
    print("| coordinator | transactions | transactions/s | ratio to Kafka |")
    print("|---|---:|---:|---:|")
    print(f"| Kafka 4.4's own | {direct_n} | {direct:.1f} | 1 |")
    print(f"| kgc, local store (fsync always) | {through_n} | {through:.1f} | {through / direct:.2f} |")
    print(f"| kgc, replicated store | {shared_n} | {shared:.1f} | {shared / direct:.2f} |")


if __name__ == "__main__":
    main()
