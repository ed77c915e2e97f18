"""What a client is told when upstream cannot be reached: retry later, keep the coordinator.

A Metadata request that cannot be forwarded is answered here: kgc's coordinator nodes are
the only brokers and every requested topic has LEADER_NOT_AVAILABLE, the retriable error
Kafka itself gives during a leader election. Clients keep their connection to kgc (so
their groups carry on), back off, and refresh until upstream answers again.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from coordinator.gateway.rewrite import Broker
from protocol.errors import ErrorCode


def metadata_without_upstream(version: int, correlation_id: int, request_body: bytes,
                              coordinators: Sequence[Broker], cluster_id: str | None) -> bytes:
    """The Metadata response payload (header + body) for when upstream is unavailable.

    `authorized_operations=None` is kafka-python's spelling of Kafka's "not requested" (INT32_MIN).
    """
    request = MetadataRequest.decode(request_body, version=version)
    # "all topics" (v0: empty list, v1+: null) lists none: we know of none.
    topics = [
        MetadataResponse.MetadataResponseTopic(
            version=version, error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=topic.name,
            topic_id=topic.topic_id, is_internal=False, partitions=[],
            authorized_operations=None)
        for topic in request.topics or ()]
    brokers = [MetadataResponse.MetadataResponseBroker(version=version, node_id=c.node_id, host=c.host,
                                                       port=c.port, rack=None) for c in coordinators]
    response = MetadataResponse(
        version=version, throttle_time_ms=0, brokers=brokers, cluster_id=cluster_id,
        controller_id=-1, topics=topics, authorized_operations=None,
        error_code=ErrorCode.NONE)
    response.with_header(correlation_id=correlation_id)
    return response.encode(header=True)
