"""ApiVersions, and Metadata when kgc is the whole cluster (standalone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

from protocol.answers.common import AUTHORIZED_OPERATIONS_OMITTED, UNKNOWN_NODE_ID, requested
from protocol.errors import ErrorCode

_FEATURES_SINCE = 3     # ApiVersions v3 added the feature flags (KIP-584)


def api_versions_response(version: int, ranges: Mapping[int, tuple[int, int]],
                          code: int = ErrorCode.NONE, *, supported_features: Sequence[tuple[str, int, int]] = (),
                          finalized_features: Sequence[tuple[str, int, int]] = (),
                          features_epoch: int = -1) -> ApiMessage:
    """v3+ carries the feature flags: (name, min, max) of the supported versions and of the
    finalized levels; older versions have no place for them."""
    cls = ApiVersionsResponse
    api_keys = [cls.ApiVersion(version=version, api_key=int(key), min_version=low, max_version=high)
                for key, (low, high) in sorted(ranges.items())]
    if version < _FEATURES_SINCE:
        return cls(version=version, error_code=int(code), api_keys=api_keys, throttle_time_ms=0)
    return cls(version=version, error_code=int(code), api_keys=api_keys, throttle_time_ms=0,
               supported_features=[cls.SupportedFeatureKey(version=version, name=name, min_version=low,
                                                           max_version=high)
                                   for name, low, high in supported_features],
               finalized_features_epoch=features_epoch,
               finalized_features=[cls.FinalizedFeatureKey(version=version, name=name, min_version_level=low,
                                                           max_version_level=high)
                                   for name, low, high in finalized_features])


def api_versions_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    """KIP-511: whatever version was asked, a v0 body listing only ApiVersions' own range:
    clients read an ApiVersions error body as v0 (kafka-python `ApiVersionsResponse.decode`,
    Kafka `ApiVersionsResponse.parse` falls back to v0), then retry at a version we list.
    Encode it at `response.version`."""
    return api_versions_response(0, {api.key: api.versions}, code)


def standalone_metadata(version: int, node: Any, cluster_id: str, request: Any) -> ApiMessage:
    """kgc (`node`: a `CoordinatorNode`) is the only broker and the cluster has no topics:
    every topic asked for is UNKNOWN_TOPIC_OR_PARTITION."""
    broker = MetadataResponse.MetadataResponseBroker(version=version, node_id=node.node_id, host=node.host,
                                                     port=node.port, rack=None)
    topics = [MetadataResponse.MetadataResponseTopic(
        version=version, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=topic.name, topic_id=topic.topic_id,
        is_internal=False, partitions=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for topic in request.topics or ()]
    return MetadataResponse(version=version, throttle_time_ms=0, brokers=[broker], cluster_id=cluster_id,
                            controller_id=node.node_id, topics=topics,
                            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, error_code=0)


def metadata_error(api: Any, version: int, request: Any, code: int, message: str | None) -> ApiMessage:
    if version < 13:
        requested(request, api, version, "topic")
    asked = (request.topics or []) if request is not None else []
    topics = [MetadataResponse.MetadataResponseTopic(version=version, error_code=code, name=topic.name,
                                                     topic_id=topic.topic_id, is_internal=False, partitions=[],
                                                     authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
              for topic in asked]
    return MetadataResponse(version=version, throttle_time_ms=0, brokers=[], cluster_id=None,
                            controller_id=UNKNOWN_NODE_ID, topics=topics,
                            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, error_code=code)
