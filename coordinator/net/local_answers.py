"""Answers kgc gives without the coordinator: ApiVersions, and Metadata when standalone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataResponse

from protocol.api_keys import LOCAL_VERSIONS
from protocol.error_responses import AUTHORIZED_OPERATIONS_OMITTED, api_versions_response
from protocol.errors import ErrorCode

CLUSTER_ID = "kgc-standalone"


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    node_id: int
    host: str
    port: int


class LocalAnswers:
    def __init__(self, node: CoordinatorNode,
                 upstream_ranges: Callable[[], dict[int, tuple[int, int]]] | None = None):
        self._node = node
        self._upstream_ranges = upstream_ranges

    def served_ranges(self) -> dict[int, tuple[int, int]]:
        if self._upstream_ranges is None:
            return dict(LOCAL_VERSIONS)
        # With an upstream, Metadata is forwarded (and rewritten), so upstream's range holds.
        local = {k: v for k, v in LOCAL_VERSIONS.items() if k != ApiKey.Metadata}
        merged = dict(self._upstream_ranges())
        merged.update(local)
        return merged

    def api_versions(self, request):
        return api_versions_response(request.version, self.served_ranges())

    def metadata(self, request):
        """Standalone: kgc is the only broker and the cluster has no topics."""
        version = request.version
        broker = MetadataResponse.MetadataResponseBroker(
            version=version, node_id=self._node.node_id, host=self._node.host,
            port=self._node.port, rack=None)
        topics = []
        for topic in request.topics or ():
            topics.append(MetadataResponse.MetadataResponseTopic(
                version=version, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                name=topic.name, topic_id=topic.topic_id, is_internal=False, partitions=[],
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
        return MetadataResponse(
            version=version, throttle_time_ms=0, brokers=[broker], cluster_id=CLUSTER_ID,
            controller_id=self._node.node_id, topics=topics, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            error_code=0)
