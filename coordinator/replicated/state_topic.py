"""The state topic: 50 partitions, compacted, created with kgc's settings and checked at
every start (Schema Registry's KafkaStore does the same with its schemas topic). A topic
with another partition count would send groups to other partitions than the ones their
records are in; one that deletes old segments would lose groups that commit rarely."""

from __future__ import annotations

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream_topic import TopicRefused, UpstreamTopic
from protocol.errors import ErrorCode

CLIENT_ID = "kgc-state"
_DESCRIBE_CONFIGS_VERSION = 1
_TOPIC_RESOURCE = 2
# A group commit of a 200,000-partition OffsetCommit is one batch of some megabytes.
MAX_MESSAGE_BYTES = 64 << 20


class StateTopic(UpstreamTopic):
    def __init__(self, cluster: UpstreamCluster, topic: str, num_partitions: int, *, replication_factor: int,
                 min_insync_replicas: int, request_timeout_ms: int = 30_000):
        super().__init__(cluster, topic, num_partitions, client_id=CLIENT_ID, replication_factor=replication_factor,
                         configs={"cleanup.policy": "compact", "min.insync.replicas": str(min_insync_replicas),
                                  "max.message.bytes": str(MAX_MESSAGE_BYTES),
                                  "unclean.leader.election.enable": "false"},
                         request_timeout_ms=request_timeout_ms)

    async def ensure(self) -> None:
        await super().ensure()
        cls = DescribeConfigsRequest[_DESCRIBE_CONFIGS_VERSION]
        response = await self.cluster.request(cls(resources=[cls.DescribeConfigsResource(
            resource_type=_TOPIC_RESOURCE, resource_name=self.topic, configuration_keys=["cleanup.policy"])],
            include_synonyms=False), DescribeConfigsResponse)
        (result,) = response.results
        code = ErrorCode(result.error_code)
        if code is not ErrorCode.NONE:
            raise TopicRefused(f"cannot read the configs of the state topic {self.topic}: {code.name}")
        policy = next((c.value for c in result.configs if c.name == "cleanup.policy"), None)
        if policy != "compact":
            raise TopicRefused(f"the state topic {self.topic} has cleanup.policy={policy}; kgc needs compact "
                               "(delete would drop groups that commit rarely): change it or choose another "
                               "state_topic")
