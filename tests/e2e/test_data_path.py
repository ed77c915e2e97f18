"""Bulk data through kgc: 100 MB from an idempotent acks=all producer to a consumer, both
bootstrapped against kgc. `transfer` fails unless every record is acknowledged and then
fetched exactly once, in order per partition. Throughput is measured by
`python -m tests.e2e.throughput`, only logged here.

Large Fetch responses reach the consumer as they arrive at kgc (cut-through,
`coordinator/gateway/upstream.py`); each client library that fetches here reads such
responses, checked the same way, and kgc's metric shows they were streamed."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import time

import pytest

from tests.e2e.throughput import PARTITIONS, RECORD_BYTES, SequenceCheck, produce, records_for, transfer
from tests.support.admin import create_topic, new_name
from tests.support.kafkajs import JS_DIR
from tests.support.kgc import kgc_before
from tests.support.kgc_http import metrics_of

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

# 100 MB takes about 15 s here; KGC_E2E_TRANSFER_MB makes it smaller (or larger) on demand.
TRANSFER_MB = float(os.environ.get("KGC_E2E_TRANSFER_MB", "100"))
# Per client: enough for Fetch responses of a megabyte per partition (each library's default).
CLIENT_FETCH_MB = 8
STREAMED = "kgc_upstream_streamed_responses_total"


def test_100_mb_through_kgc_arrive_complete_and_in_order_per_partition(kgc):
    result = transfer(kgc.bootstrap, TRANSFER_MB)
    log.info("%d records (%.0f MB) through kgc: produce %.1f MB/s, fetch %.1f MB/s", result.records,
             result.payload_bytes / 2**20, result.produce_mb_s, result.fetch_mb_s)


@pytest.fixture(scope="module")
def loaded(kafka):
    """kgc with its HTTP port known, and a topic holding CLIENT_FETCH_MB of checked records."""
    with kgc_before(kafka) as (kgc, http_port):
        topic = create_topic(kgc.bootstrap, PARTITIONS)
        records = records_for(CLIENT_FETCH_MB)
        produce(kgc.bootstrap, topic, records)
        yield kgc, http_port, topic, records


def kafka_python_fetch(bootstrap: str, topic: str, check: SequenceCheck) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        start = time.monotonic()
        while not check.complete:
            check.check_deadline(start)
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for record in batch:
                    check.take(tp.partition, record.value)
    finally:
        consumer.close()


async def aiokafka_fetch(bootstrap: str, topic: str, check: SequenceCheck) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        start = time.monotonic()
        while not check.complete:
            check.check_deadline(start)
            for tp, batch in (await consumer.getmany(timeout_ms=500)).items():
                for record in batch:
                    check.take(tp.partition, record.value)
    finally:
        await consumer.stop()


@pytest.mark.parametrize("library", ["kafka-python", "aiokafka"])
def test_python_clients_fetch_streamed_responses_complete_and_in_order(loaded, library):
    kgc, http_port, topic, records = loaded
    streamed = metrics_of(http_port).get(STREAMED)
    check = SequenceCheck(records)
    if library == "kafka-python":
        kafka_python_fetch(kgc.bootstrap, topic, check)
    else:
        asyncio.run(aiokafka_fetch(kgc.bootstrap, topic, check))
    assert check.next_seq == [records // PARTITIONS] * PARTITIONS
    assert metrics_of(http_port).get(STREAMED) > streamed, "large Fetch responses went through cut-through"


def test_kafkajs_fetches_streamed_responses_complete_and_in_order(node, loaded):
    kgc, http_port, topic, records = loaded
    streamed = metrics_of(http_port).get(STREAMED)
    run = subprocess.run([node, "fetch.mjs", kgc.bootstrap, topic, new_name("kafkajs-fetch"), str(records),
                          str(PARTITIONS), str(RECORD_BYTES)], cwd=JS_DIR, capture_output=True, text=True,
                         timeout=150)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"received": records}
    assert metrics_of(http_port).get(STREAMED) > streamed, "large Fetch responses went through cut-through"
