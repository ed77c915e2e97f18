"""A KIP-848 consumer (librdkafka, `group.protocol=consumer`) in a process of its own, so
a test can kill it with SIGKILL: a crash, with no leave and no last commit.

    python -m tests.e2e.consumer_protocol_process BOOTSTRAP GROUP TOPIC OUTPUT

It appends each record's value (`partition:sequence`) to OUTPUT as one line, flushed,
commits after every batch, and runs until killed (bounded by a ten-minute guard).
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer

GUARD_S = 600


def main(bootstrap: str, group: str, topic: str, output: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([topic])
    deadline = time.monotonic() + GUARD_S
    with open(output, "ab", buffering=0) as out:
        while time.monotonic() < deadline:
            records = [m for m in consumer.consume(500, 0.1) if m.error() is None]
            if records:
                out.write(b"".join(m.value() + b"\n" for m in records))
                consumer.commit(asynchronous=False)


if __name__ == "__main__":
    main(*sys.argv[1:5])
