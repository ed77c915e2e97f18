"""Several `kgc serve --store replicated` processes over one state topic, in front of a
KafkaCluster (tests/support/kafka.py): started, watched through /v1/ownership, and asked
where a group's coordinator is."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.partitioning import partition_for
from coordinator.probe import request_response
from tests.support.kgc import KgcProcess
from tests.support.kgc_http import get_json
from tests.support.ports import free_port

SESSION_TIMEOUT_MS = 6_000      # the upstream's group.min.session.timeout.ms


class Instance:
    def __init__(self, kafka, state: str, log_path: str, *, replicas: int = 1,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS):
        self.http_port = free_port()
        self.log_path = log_path
        # On one host each instance needs its own listener port per upstream broker.
        self.broker_ports = {node.node_id: free_port() for node in kafka.nodes}
        brokers = [a for node_id, port in self.broker_ports.items() for a in ("--broker-port", f"{node_id}={port}")]
        self.process = KgcProcess("--upstream", kafka.bootstrap, *brokers, "--store", "replicated",
                                  "--state-topic", state, "--state-topic-replication-factor", str(replicas),
                                  "--state-topic-min-insync-replicas", str(min(replicas, 2)),
                                  "--ownership-session-timeout-ms", str(session_timeout_ms),
                                  "--http-port", str(self.http_port), log_path=log_path)

    @property
    def address(self) -> str:
        return self.process.bootstrap

    def ownership(self) -> dict:
        return asyncio.run(get_json(self.http_port, "/v1/ownership"))[1]

    def coordinator_of(self, group: str) -> tuple[int, str]:
        host, port = self.address.split(":")
        response = request_response((host, int(port)), FindCoordinatorRequest[3](key=group, key_type=0),
                                    FindCoordinatorResponse)
        return response.error_code, f"{response.host}:{response.port}"

    def listed_brokers(self) -> set[str]:
        """The addresses a client's Metadata through this instance lists."""
        host, port = self.address.split(":")
        response = request_response((host, int(port)), MetadataRequest[12](topics=[], allow_auto_topic_creation=False,
                                                                           include_topic_authorized_operations=False),
                                    MetadataResponse)
        return {f"{b.host}:{b.port}" for b in response.brokers}


@contextlib.contextmanager
def instances(kafka, directory: Path, state: str, count: int = 3, *, replicas: int = 1) -> Iterator[list[Instance]]:
    """`count` instances, started one after another, stopped (SIGTERM) at the end; the list
    is the test's to change (an instance it kills or stops, it removes)."""
    started = [Instance(kafka, state, str(directory / f"kgc-{i}.log"), replicas=replicas) for i in range(count)]
    try:
        for instance in started:
            instance.process.start(timeout_s=60)
        yield list(started)
    finally:
        for instance in started:
            instance.process.stop()


def shared_by(live: list[Instance]) -> bool:
    """Every partition owned by exactly one live instance, and every live instance agrees on the map."""
    views = [i.ownership() for i in live]
    owned = [set(v["owned"]) for v in views]
    maps = {tuple(sorted(v["owners"].items())) for v in views}
    return (len(maps) == 1 and sum(map(len, owned)) == 50 and set().union(*owned) == set(range(50))
            and all(owned) and set(dict(next(iter(maps))).values()) == {i.address for i in live})


def owner_of(live: list[Instance], group: str) -> Instance:
    partition = str(partition_for(group))
    return next(i for i in live if i.ownership()["owners"].get(partition) == i.address)


def serving_broker(live: list[Instance], node_id: int) -> Instance:
    """The instance whose listener clients reach upstream broker `node_id` through."""
    address = live[0].ownership()["brokers"][str(node_id)]
    host, port = address.rsplit(":", 1)
    return next(i for i in live if int(port) in i.broker_ports.values())


def leader_of(live: list[Instance]) -> Instance:
    """The instance that leads the ownership group (it computed the last assignment)."""
    return next(i for i in live if i.ownership()["leader"])
