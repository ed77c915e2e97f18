"""kafka-python's and aiokafka's consume-transform-produce loops, as exactly-once
applications written with them run it: consume a few records, produce each to the output in
a transaction, add the consumer's positions to it (AddOffsetsToTxn, then TxnOffsetCommit),
commit; every third transaction aborted instead and the consumer rewound to what the group
has committed, asked through the same bootstrap (an aborted offset let through would skip
records, which `eos.assert_exactly_once` then finds missing).

Both return the counts `eos.copy_transactionally` returns for librdkafka.
"""

from __future__ import annotations

import asyncio
import time
import uuid

PER_TRANSACTION = 40
ABORT_EVERY = 3


def copy_with_kafka_python(bootstrap: str, group: str, source: str, target: str, until: int, *,
                           timeout_s: float = 120.0) -> dict:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    consumer = KafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kafka-python-{uuid.uuid4()}")
    committed = aborted = transactions = 0
    deadline = time.monotonic() + timeout_s
    try:
        producer.init_transactions()
        while committed < until:
            assert time.monotonic() < deadline, f"copied {committed} of {until} in {timeout_s}s"
            records = [r for batch in consumer.poll(1000, max_records=PER_TRANSACTION).values() for r in batch]
            if not records:
                continue
            producer.begin_transaction()
            for record in records:
                producer.send(target, record.value)
            positions = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()}
            producer.send_offsets_to_transaction(positions, consumer.group_metadata())
            transactions += 1
            if transactions % ABORT_EVERY == 0:
                producer.abort_transaction()
                aborted += len(records)
                for tp in consumer.assignment():
                    consumer.seek(tp, consumer.committed(tp) or 0)
            else:
                producer.commit_transaction()
                committed += len(records)
    finally:
        consumer.close()
        producer.close()
    return {"committed": committed, "aborted": aborted, "transactions": transactions}


def copy_with_aiokafka(bootstrap: str, group: str, source: str, target: str, until: int, *,
                       timeout_s: float = 120.0) -> dict:
    return asyncio.run(asyncio.wait_for(_copy_with_aiokafka(bootstrap, group, source, target, until), timeout_s))


async def _copy_with_aiokafka(bootstrap: str, group: str, source: str, target: str, until: int) -> dict:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aiokafka-{uuid.uuid4()}")
    committed = aborted = transactions = 0
    await consumer.start()
    try:
        await producer.start()
        try:
            while committed < until:
                batches = await consumer.getmany(timeout_ms=1000, max_records=PER_TRANSACTION)
                records = [r for batch in batches.values() for r in batch]
                if not records:
                    continue
                await producer.begin_transaction()
                for record in records:
                    await producer.send(target, record.value)
                # aiokafka's TxnOffsetCommit (v0) names the group alone, no member or generation.
                positions = {tp: await consumer.position(tp) for tp in consumer.assignment()}
                await producer.send_offsets_to_transaction(positions, group)
                transactions += 1
                if transactions % ABORT_EVERY == 0:
                    await producer.abort_transaction()
                    aborted += len(records)
                    for tp in consumer.assignment():
                        consumer.seek(tp, await consumer.committed(tp) or 0)
                else:
                    await producer.commit_transaction()
                    committed += len(records)
        finally:
            await producer.stop()
    finally:
        await consumer.stop()
    return {"committed": committed, "aborted": aborted, "transactions": transactions}
