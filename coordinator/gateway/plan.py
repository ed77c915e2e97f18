"""Where kgc listens: the bootstrap/coordinator listener and one listener per upstream broker.

Port-per-broker (Kroxylicious `PortIdentifiesNodeIdentificationStrategy`): the listener for
upstream node N is `broker_port_base + N`, or `port_map[N]` when given. Derived from the
node id, not from the order brokers were discovered in, so a broker keeps its port across
kgc restarts and rediscovery and clients holding old metadata still reach the same node.
Every listener is advertised as `advertised_host`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from coordinator.gateway.rewrite import Broker

_MAX_PORT = 65535


class ListenerPlanError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ListenerPlan:
    coordinator_node_id: int
    advertised_host: str
    bootstrap_port: int
    broker_port_base: int
    port_map: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        ports = list(self.port_map.values())
        if len(set(ports)) != len(ports) or self.bootstrap_port in ports:
            raise ListenerPlanError(f"port map {dict(self.port_map)} reuses a port "
                                    f"(bootstrap listener: {self.bootstrap_port})")

    @property
    def coordinator(self) -> Broker:
        """kgc's own node: answers FindCoordinator for groups, listed in every Metadata."""
        return Broker(self.coordinator_node_id, self.advertised_host, self.bootstrap_port)

    def listener_port(self, node_id: int) -> int:
        port = self.port_map.get(node_id)
        if port is None:
            port = self.broker_port_base + node_id
        if not 0 < port <= _MAX_PORT or port == self.bootstrap_port:
            raise ListenerPlanError(f"upstream node {node_id} has no usable kgc port ({port}): "
                                    "give it one in the port map or lower the base port")
        return port

    def listener_address(self, node_id: int) -> tuple[str, int]:
        """Where clients reach upstream node `node_id`; kgc's own node is the bootstrap listener."""
        if node_id == self.coordinator_node_id:
            return self.advertised_host, self.bootstrap_port
        return self.advertised_host, self.listener_port(node_id)

    def check(self, node_ids: Iterable[int]) -> None:
        """Raises if upstream uses kgc's node id or two nodes would share a port."""
        owner: dict[int, int] = {}
        for node_id in node_ids:
            if node_id == self.coordinator_node_id:
                raise ListenerPlanError(f"upstream broker {node_id} uses kgc's coordinator node id: "
                                        "configure another one")
            port = self.listener_port(node_id)
            if owner.setdefault(port, node_id) != node_id:
                raise ListenerPlanError(f"upstream nodes {owner[port]} and {node_id} both map to port {port}")
