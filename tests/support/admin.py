"""What the e2e tests ask of a cluster, through real admin clients and a real producer:
topics, sequenced records, and what a coordinator says about a group.

Record values are `b"<partition>:<sequence>"`, so a consumer's output can be checked for
loss, duplicates and per-partition order without trusting offsets alone.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError
from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from coordinator.probe import request_response
from tests.support.clients import Consumed

ADMIN_TIMEOUT_MS = 10_000


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="e2e-admin", request_timeout_ms=ADMIN_TIMEOUT_MS)


def create_topic(bootstrap: str, partitions: int, name: str | None = None,
                 configs: dict[str, str] | None = None) -> str:
    name = name or new_name("e2e")
    client = admin(bootstrap)
    try:
        client.create_topics({name: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}},
                             timeout_ms=ADMIN_TIMEOUT_MS, wait_for_metadata=True)
    finally:
        client.close()
    return name


def produce_sequenced(bootstrap: str, topic: str, partitions: int, per_partition: int, *,
                      first_sequence: int = 0) -> None:
    """`per_partition` records into each partition, acks=all and idempotent, all acknowledged."""
    failures = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5})
    for seq in range(first_sequence, first_sequence + per_partition):
        for p in range(partitions):
            producer.produce(topic, value=b"%d:%d" % (p, seq), partition=p,
                             on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(30) == 0, "records still unacknowledged after 30 s"
    assert not failures, failures


def sequences_by_partition(consumed: Iterable[Consumed]) -> dict[int, list[int]]:
    """Sequence numbers per partition in consumption order; checks each record names its partition."""
    out: dict[int, list[int]] = defaultdict(list)
    for record in consumed:
        partition, seq = (int(x) for x in record.value.split(b":"))
        assert partition == record.partition, record
        out[partition].append(seq)
    return dict(out)


def describe_group(bootstrap: str, group: str) -> dict:
    """DescribeGroups as the coordinator that `bootstrap`'s cluster names answers it."""
    client = admin(bootstrap)
    try:
        return client.describe_groups([group])[group]
    finally:
        client.close()


def member_assignments(description: dict) -> dict[str, frozenset[int]]:
    """client id -> partitions, as the coordinator holds them (decoded ConsumerProtocolAssignment)."""
    return {m["client_id"]: frozenset(p for t in m["member_assignment"]["assigned_partitions"]
                                      for p in t["partitions"])
            for m in description["members"]}


def group_ids(bootstrap: str) -> set[str]:
    """ListGroups on every broker `bootstrap`'s cluster lists."""
    client = admin(bootstrap)
    try:
        return {g["group_id"] for g in client.list_groups()}
    finally:
        client.close()


# What a Kafka broker's DescribeGroups (v0-v5) says of a group its coordinator does not know.
UNKNOWN_AT_KAFKA = ("Dead", 0)


def group_at_broker(host: str, port: int, group: str) -> tuple[str, int]:
    """Asked of one broker on its own port, bypassing any FindCoordinator routing: the state
    and member count its DescribeGroups gives `group` (`UNKNOWN_AT_KAFKA` for a group Kafka
    does not know; Tansu says "Empty" with no members, and its ListGroups lists nothing, not
    even its own groups, so ListGroups cannot serve as the probe). A raw request, because
    kafka-python's admin cannot decode Tansu's authorized-operations bits."""
    described = request_response((host, port), DescribeGroupsRequest[5](
        groups=[group], include_authorized_operations=False), DescribeGroupsResponse)
    [state] = described.groups
    assert state.error_code == 0, state
    return state.group_state, len(state.members)


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    client = admin(bootstrap)
    try:
        offsets = client.list_group_offsets({group: None})[group]
    finally:
        client.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


def offsets_once_owned(bootstrap: str, group: str, timeout_s: float = 60) -> dict[int, int]:
    """The group's offsets, asked again while no kgc instance serves its partition yet
    (several instances over the replicated store: a partition moving, or loading)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return committed_offsets(bootstrap, group)
        except (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
