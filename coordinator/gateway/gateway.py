"""The gateway as the network layer sees it: sessions per client connection, merged ranges."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.offsets_topic import OffsetsTopic
from coordinator.gateway.plan import ListenerPlan
from coordinator.gateway.rewrite import Broker
from coordinator.gateway.session import GatewaySession, StreamingClient
from coordinator.gateway.versions import merge_api_versions


class Gateway:
    def __init__(self, cluster: UpstreamCluster, plan: ListenerPlan, offsets_topic: OffsetsTopic | None = None,
                 *, as_kgc: bool = True):
        self.cluster = cluster
        self.plan = plan
        self.offsets_topic = offsets_topic
        self.as_kgc = as_kgc           # clients' upstream connections log in as kgc (not in passthrough)
        # Where Metadata sends clients for upstream node N: this kgc's listener for it, unless
        # several instances share the work (the app then spreads the brokers over them all).
        self.address_for: Callable[[int], tuple[str, int]] = plan.listener_address
        # The coordinator nodes every Metadata lists: this kgc's, or every instance's.
        self.coordinators: Callable[[], Sequence[Broker]] = lambda: (plan.coordinator,)

    def session(self, listener_node_id: int | None, client: StreamingClient | None = None) -> GatewaySession:
        """`client`: the connection Fetch responses may stream to."""
        return GatewaySession(self.cluster, self.plan, listener_node_id, self.offsets_topic, as_kgc=self.as_kgc,
                              client=client, address_for=self.address_for, coordinators=self.coordinators)

    def api_versions(self, local: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """ApiVersions ranges for clients: `local` for what kgc serves, upstream's for the rest."""
        return merge_api_versions(local, self.cluster.api_versions, self.cluster.features)
