"""Log start and end offsets of every partition of the upstream cluster, for the audit.

A few round trips with kafka-python's protocol classes on kgc's own upstream connections
(with the cluster's TLS and SASL settings, `kafka_security`), no client library state:
ApiVersions (to pick versions both sides speak), Metadata for all topics (to find each
partition's leader, and from v10 each topic's id), then per leader one ListOffsets for the
earliest (-2) and one for the latest (-1) offset of its partitions. A partition whose leader is unknown or that answers
with an error is left out, with a warning: the audit then reports no lag for it rather than
a wrong one.

`topic_offsets(topic)` is the same for one topic, as a consumer reading it committed-only
sees it: each partition's log start and last stable offset (ListOffsets with
read_committed), and the cluster's id (`kgc audit --bootstrap` pins its read to these, and
an incremental run checks the cluster is the one its previous report read).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass
from functools import partial

from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from coordinator.gateway.login import login
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable, call
from coordinator.offline.kafka_security import PLAINTEXT, ClientSecurity
from protocol.api_keys import NoCommonVersion, pick_version

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
# ListOffsets v1 is the oldest Kafka 4 serves; Metadata v1 the first that takes null for
# "all topics", v10 the first that answers each topic's id (for offsets of a topic deleted
# and created again since: the commit recorded the old id). Newer ListOffsets versions add
# nothing this needs, so stay with well-trodden ones.
LIST_OFFSETS_VERSIONS = (1, 5)
METADATA_VERSIONS = (1, 12)


class UpstreamError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    cluster_id: str | None
    # partition -> (log start, last stable offset): what a read_committed consumer reads
    partitions: dict[int, tuple[int, int]]


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class UpstreamOffsets:
    def __init__(self, bootstrap: str, *, security: ClientSecurity = PLAINTEXT, timeout_s: float = 10.0,
                 client_id: str = "kgc-audit"):
        self.bootstrap = parse_host_port(bootstrap)
        self.security = security
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._correlation_ids = itertools.count(1)

    def log_offsets(self) -> dict[tuple[str, int], tuple[int, int]]:
        return self.log_offsets_and_topic_ids()[0]

    def log_offsets_and_topic_ids(self) -> tuple[dict[tuple[str, int], tuple[int, int]], dict[str, uuid.UUID]]:
        """`log_offsets`, and each topic's id from the same Metadata answer (none from a
        cluster that answers Metadata below v10, or with the zero id)."""
        _cluster_id, offsets, topic_ids = asyncio.run(self._log_offsets(None, READ_UNCOMMITTED))
        return offsets, topic_ids

    def topic_offsets(self, topic: str) -> TopicOffsets:
        """`topic`'s partitions, each whole or the call fails (a partition without a leader
        cannot be read either); UpstreamError if the cluster has no such topic."""
        cluster_id, offsets, _topic_ids = asyncio.run(self._log_offsets([topic], READ_COMMITTED))
        partitions = {p: bounds for (_topic, p), bounds in offsets.items()}
        if not partitions:
            raise UpstreamError(f"the cluster has no topic {topic} (or this user may not describe it)")
        missing = sorted(set(range(max(partitions) + 1)) - set(partitions))
        if missing:
            raise UpstreamError(f"no log offsets for partitions {missing} of {topic} (no leader?)")
        return TopicOffsets(cluster_id, partitions)

    async def _log_offsets(self, topics: list[str] | None, isolation_level: int):
        connections: dict[tuple[str, int], UpstreamConnection] = {}
        try:
            return await self._read(partial(self._call, connections), topics, isolation_level)
        except (UpstreamUnavailable, OSError) as e:
            raise UpstreamError(str(e)) from e
        finally:
            for conn in connections.values():
                await conn.close()

    async def _read(self, call_at, topics: list[str] | None, isolation_level: int
                    ) -> tuple[str | None, dict[tuple[str, int], tuple[int, int]], dict[str, uuid.UUID]]:
        versions = await self._api_versions(call_at)
        try:
            metadata_version = pick_version(METADATA_VERSIONS, versions.get(MetadataRequest.API_KEY), "Metadata")
            list_version = pick_version(LIST_OFFSETS_VERSIONS, versions.get(ListOffsetsRequest.API_KEY),
                                        "ListOffsets")
        except NoCommonVersion as e:
            raise UpstreamError(str(e)) from e
        metadata = await call_at(self.bootstrap, MetadataRequest[metadata_version](
            topics=None if topics is None else [
                MetadataRequest.MetadataRequestTopic(version=metadata_version, name=t) for t in topics],
            allow_auto_topic_creation=False), MetadataResponse)
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
        topic_ids: dict[str, uuid.UUID] = {}
        for topic in metadata.topics:
            if topic.error_code:
                log.warning("upstream: topic %s: error %d", topic.name, topic.error_code)
                continue
            topic_id = getattr(topic, "topic_id", None)
            if isinstance(topic_id, uuid.UUID) and topic_id.int:
                topic_ids[topic.name] = topic_id
            for partition in topic.partitions:
                if partition.leader_id in brokers:
                    by_leader[partition.leader_id].append((topic.name, partition.partition_index))
                else:
                    log.warning("upstream: %s-%d has no leader", topic.name, partition.partition_index)
        offsets: dict[tuple[str, int], tuple[int, int]] = {}
        for leader, partitions in by_leader.items():
            address = brokers[leader]
            starts = await self._list_offsets(call_at, address, list_version, partitions, EARLIEST, isolation_level)
            ends = await self._list_offsets(call_at, address, list_version, partitions, LATEST, isolation_level)
            for tp in partitions:
                if tp in starts and tp in ends:
                    offsets[tp] = (starts[tp], ends[tp])
        return getattr(metadata, "cluster_id", None), offsets, topic_ids

    async def _api_versions(self, call_at) -> dict[int, tuple[int, int]]:
        response = await call_at(self.bootstrap, ApiVersionsRequest[0](), ApiVersionsResponse)
        if response.error_code:
            raise UpstreamError(f"ApiVersions answered error {response.error_code}")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    async def _list_offsets(self, call_at, address: tuple[str, int], version: int,
                            partitions: list[tuple[str, int]], timestamp: int,
                            isolation_level: int) -> dict[tuple[str, int], int]:
        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        partition_cls = topic_cls.ListOffsetsPartition
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        request = ListOffsetsRequest[version](replica_id=-1, isolation_level=isolation_level, topics=[
            topic_cls(name=topic, partitions=[partition_cls(partition_index=p, timestamp=timestamp) for p in ps])
            for topic, ps in by_topic.items()])
        response = await call_at(address, request, ListOffsetsResponse)
        found = {}
        for topic in response.topics:
            for partition in topic.partitions:
                if partition.error_code:
                    log.warning("upstream: ListOffsets %s-%d: error %d", topic.name, partition.partition_index,
                                partition.error_code)
                else:
                    found[topic.name, partition.partition_index] = partition.offset
        return found

    async def _call(self, connections: dict[tuple[str, int], UpstreamConnection], address: tuple[str, int],
                    request, response_class):
        """`request` to the broker at `address`, on one connection per broker, opened (and
        logged in) on first use."""
        conn = connections.get(address)
        if conn is None:
            conn = connections[address] = UpstreamConnection(*address, connect_timeout_ms=int(self.timeout_s * 1000),
                                                             tls=self.security.tls)
            if self.security.login is not None:
                await login(partial(self._request, conn), self.security.login, f"{address[0]}:{address[1]}")
        return await self._request(conn, request, response_class)

    async def _request(self, conn: UpstreamConnection, request, response_class):
        return await call(conn, next(self._correlation_ids), request, response_class, client_id=self.client_id,
                          timeout_s=self.timeout_s)
