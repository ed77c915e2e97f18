"""One topic kgc owns on the upstream cluster: created with the partition count kgc needs
(and refused with any other), its leaders, and kgc's own connections to them.

Used by the participant topic of transactional offsets (coordinator/txn) and by the
replicated store's state topic (coordinator/replicated).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable, call
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_METADATA_VERSION = 4
_CREATE_TOPICS_VERSION = 4
_METADATA_RETRY_S = 0.1


class TopicRefused(RuntimeError):
    """The topic upstream cannot be used as it is (its partition count, its cleanup policy)."""


class UpstreamTopic:
    def __init__(self, cluster: UpstreamCluster, topic: str, num_partitions: int, *, client_id: str,
                 replication_factor: int = -1, configs: dict[str, str] | None = None,
                 request_timeout_ms: int = 30_000):
        self.topic = topic
        self.num_partitions = num_partitions
        self._cluster = cluster
        self._client_id = client_id
        self._replication_factor = replication_factor
        self._configs = dict(configs or {})
        self._timeout_s = request_timeout_ms / 1000
        self._connections: dict[int, UpstreamConnection] = {}
        self._correlation_ids = itertools.count(1)
        self._leaders: dict[int, int] = {}
        self._brokers: dict[int, tuple[str, int]] = {}

    @property
    def cluster(self) -> UpstreamCluster:
        return self._cluster

    async def ensure(self) -> None:
        """Create the topic if it is missing; refuse one with the wrong partition count."""
        request = CreateTopicsRequest[_CREATE_TOPICS_VERSION](topics=[
            CreateTopicsRequest.CreatableTopic(
                name=self.topic, num_partitions=self.num_partitions, replication_factor=self._replication_factor,
                assignments=[], configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                         for k, v in self._configs.items()])],
            timeout_ms=int(self._timeout_s * 1000), validate_only=False)
        response = await self._cluster.request(request, CreateTopicsResponse)
        code = ErrorCode(response.topics[0].error_code)
        if code is ErrorCode.NONE:
            log.info("created %s upstream (%d partitions, %s)", self.topic, self.num_partitions, self._configs)
        elif code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            raise TopicRefused(f"cannot create the topic {self.topic} upstream: {code.name} "
                               f"({response.topics[0].error_message})")
        # A topic just created reaches every broker's metadata a moment later.
        deadline = asyncio.get_running_loop().time() + self._timeout_s
        await self.refresh()
        while not self._leaders and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(_METADATA_RETRY_S)
            await self.refresh()
        if len(self._leaders) != self.num_partitions:
            raise TopicRefused(f"the topic {self.topic} has {len(self._leaders)} partitions upstream; kgc needs "
                               f"{self.num_partitions}, one per group partition")

    async def refresh(self) -> None:
        metadata = await self._cluster.request(
            MetadataRequest[_METADATA_VERSION](topics=[self.topic], allow_auto_topic_creation=False),
            MetadataResponse)
        self._brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        for topic in metadata.topics:
            if topic.name == self.topic and topic.error_code == 0:
                self._leaders = {p.partition_index: p.leader_id for p in topic.partitions}

    def forget_leader(self, partition: int) -> None:
        self._leaders.pop(partition, None)

    async def leader(self, partition: int) -> UpstreamConnection:
        return await self.connection(await self.leader_id(partition))

    async def leader_id(self, partition: int) -> int:
        node = self._leaders.get(partition, -1)
        if node not in self._brokers:
            await self.refresh()
            node = self._leaders.get(partition, -1)
        return node

    async def own_connection(self, node_id: int) -> UpstreamConnection:
        """A connection of its own (a tail's): a broker answers one request of a
        connection at a time, so a Fetch waiting for data would hold back the Produce and
        AddPartitionsToTxn requests behind it."""
        if node_id not in self._brokers:
            await self.refresh()
        if node_id not in self._brokers:
            raise UpstreamUnavailable(f"upstream broker {node_id} is unknown", before_connect=True)
        return await self._cluster.own_connection(*self._brokers[node_id])

    async def connection(self, node_id: int) -> UpstreamConnection:
        conn = self._connections.get(node_id)
        if conn is not None and conn.failure is None:
            return conn
        conn = await self.own_connection(node_id)
        self._connections[node_id] = conn
        return conn

    async def request(self, conn: UpstreamConnection, request: Any, response_class: Any,
                      timeout_s: float | None = None) -> Any:
        return await call(conn, next(self._correlation_ids), request, response_class, client_id=self._client_id,
                          timeout_s=self._timeout_s if timeout_s is None else timeout_s)

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            await conn.close()
