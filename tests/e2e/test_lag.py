"""Consumer lag in /v1/groups, /v1/groups/{group} and /metrics, checked against a real
consumer's position through kgc in front of Kafka.

Records go one per batch (tests/support/consumer_lag.py says why); a commit past the
log end (a topic recreated under its group) must make kgc call the lag unknown, never negative.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.support.admin import create_topic, new_name
from tests.support.consumer_lag import (
    PER_PARTITION,
    commit_past_the_end,
    joined_consumer,
    produce_one_per_batch,
    read_everything,
)
from tests.support.kgc import KGC_GROUP_FLAGS, free_port, kgc_process, wait_listening
from tests.support.kgc_http import metrics_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REFRESH_MS = 200


@pytest.fixture(scope="module")
def kgc_http(kafka, tmp_path_factory):
    """kgc in front of the session's Kafka with its HTTP port known and lag refreshed often."""
    broker_port, http_port = free_port(), free_port()
    log_path = tmp_path_factory.mktemp("kgc-lag") / "kgc.log"
    with kgc_process("--upstream", kafka.bootstrap, "--broker-port", f"{kafka.node_id}={broker_port}",
                     "--http-port", str(http_port), "--lag-refresh-interval-ms", str(REFRESH_MS),
                     "--lag-metrics-per-partition", *KGC_GROUP_FLAGS, log_path=str(log_path)) as proc:
        wait_listening(broker_port)
        yield proc, http_port


def get_json(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return json.load(resp)


def until(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not (found := predicate()):
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)
    return found


def test_lag_is_the_consumers_position_minus_its_commit_in_the_api_and_the_metrics(kgc_http):
    kgc, http_port = kgc_http
    topic = create_topic(kgc.bootstrap, len(PER_PARTITION))
    produce_one_per_batch(kgc.bootstrap, topic, PER_PARTITION)
    group = new_name("lag")
    consumer = joined_consumer(kgc.bootstrap, topic, group)
    try:
        positions = read_everything(consumer, topic)
        committed = {0: 1, 1: 4, 2: 5}
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in committed.items()})
        expected = {p: positions[p] - committed[p] for p in positions}

        asked_ms = time.time_ns() // 1_000_000
        view = get_json(http_port, f"/v1/groups/{group}")   # fetches its log ends on demand
        for p, entry in view["offsets"][topic].items():
            assert (entry["offset"], entry["log_end_offset"], entry["lag"]) == (
                committed[int(p)], positions[int(p)], expected[int(p)])
            assert entry["log_end_as_of_ms"] >= asked_ms
        as_of = min(entry["log_end_as_of_ms"] for entry in view["offsets"][topic].values())
        assert view["lag"] == {"total": sum(expected.values()), "unknown_partitions": 0, "unknown_reason": None,
                               "as_of_ms": as_of,
                               "topics": {topic: {"lag": sum(expected.values()), "unknown_partitions": 0,
                                                  "unknown_reason": None, "as_of_ms": as_of}}}

        listed = {g["group_id"]: g for g in get_json(http_port, "/v1/groups")["groups"]}
        assert listed[group]["lag"]["total"] == sum(expected.values())

        # The metrics follow the periodic refresh.
        samples = until(lambda: (s := metrics_of(http_port)).get("kgc_consumer_lag", group=group, topic=topic)
                        == sum(expected.values()) and s)
        for p, lag in expected.items():
            assert samples.get("kgc_consumer_lag_partition", group=group, topic=topic, partition=str(p)) == lag
        assert samples.get("kgc_consumer_lag_unknown_partitions", group=group, topic=topic) == 0

        # The consumer catches up: lag 0 everywhere.
        consumer.commit()
        until(lambda: metrics_of(http_port).get("kgc_consumer_lag", group=group, topic=topic) == 0
              and get_json(http_port, f"/v1/groups/{group}")["lag"]["total"] == 0)
    finally:
        consumer.close()


def test_an_end_below_the_commit_is_unknown_lag_never_negative_and_never_zero(kgc_http):
    # Unknown reads as unknown everywhere: null with the reason in the API, no lag series
    # in the metrics (a 0 there would read as "caught up"), only the unknown count.
    kgc, http_port = kgc_http
    topic, group = commit_past_the_end(kgc.bootstrap)
    view = get_json(http_port, f"/v1/groups/{group}")
    entry = view["offsets"][topic]["0"]
    assert entry["lag"] is None and entry["log_end_offset"] == 5
    assert "committed offset 8 is past the log end offset 5" in entry["lag_unknown_reason"]
    for lag in (view["lag"], view["lag"]["topics"][topic]):
        assert lag["unknown_partitions"] == 1
        assert lag.get("total", lag.get("lag")) is None
        assert lag["unknown_reason"] == f"{topic}-0: {entry['lag_unknown_reason']}"
    listed = {g["group_id"]: g for g in get_json(http_port, "/v1/groups")["groups"]}
    assert listed[group]["lag"] == view["lag"]
    samples = until(lambda: (s := metrics_of(http_port)).get("kgc_consumer_lag_unknown_partitions", group=group,
                                                          topic=topic) == 1 and s)
    labels = frozenset({("group", group), ("topic", topic)})
    assert ("kgc_consumer_lag", labels) not in samples.values
    assert ("kgc_consumer_lag_partition", labels | {("partition", "0")}) not in samples.values



def test_while_the_upstream_hangs_lag_keeps_its_last_ends_and_says_how_old_they_are(kafka, kgc_http):
    # Known ends outlive a refresh that cannot reach the upstream (every lag unknown
    # would hide what was known), so what shows the lag is stale is their time: in the
    # API per partition and per sum, and for alerts the last complete refresh's timestamp
    # and a count of the failed ones.
    kgc, http_port = kgc_http
    topic = create_topic(kgc.bootstrap, len(PER_PARTITION))
    produce_one_per_batch(kgc.bootstrap, topic, PER_PARTITION)
    group = new_name("stale")
    consumer = joined_consumer(kgc.bootstrap, topic, group)
    try:
        positions = read_everything(consumer, topic)
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(0, "", -1) for p in positions})
    finally:
        consumer.close()
    total = sum(positions.values())
    until(lambda: get_json(http_port, f"/v1/groups/{group}")["lag"]["total"] == total)
    failures = metrics_of(http_port).get("kgc_log_end_refresh_failures_total")

    with kafka.paused(kafka.nodes[0].node_id):
        paused_s = time.time()
        # The periodic refresh gives up after its 5 s bound; the group's own view asks anew
        # and waits for the same bound.
        samples = until(lambda: (s := metrics_of(http_port)).get("kgc_log_end_refresh_failures_total") > failures
                        and s, timeout_s=20)
        view = get_json(http_port, f"/v1/groups/{group}")
        listed = {g["group_id"]: g for g in get_json(http_port, "/v1/groups")["groups"]}
    assert samples.get("kgc_log_ends_refreshed_timestamp_seconds") <= paused_s
    for lag in (view["lag"], listed[group]["lag"]):
        assert lag["total"] == total
        assert lag["as_of_ms"] <= paused_s * 1000
    for entry in view["offsets"][topic].values():
        assert entry["log_end_as_of_ms"] <= paused_s * 1000

    # The upstream back: the next complete refresh stamps the gauge and the ends again.
    resumed_s = time.time()
    until(lambda: metrics_of(http_port).get("kgc_log_ends_refreshed_timestamp_seconds") >= resumed_s,
          timeout_s=30)
    listed = {g["group_id"]: g for g in get_json(http_port, "/v1/groups")["groups"]}
    assert listed[group]["lag"]["as_of_ms"] >= resumed_s * 1000
