"""Coordinator settings. Every duration is an int in milliseconds; defaults are Kafka's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    new_member_join_timeout_ms: int = 300_000
    group_max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None       # None: the bind host
    node_id: int = 2_000_000_000             # kgc's own node; no upstream broker may use it
    data_dir: str | None = None              # None: in-memory log (nothing survives a restart)
    fsync: str = "always"
    segment_bytes: int = 100 * 2**20
    upstream: tuple[tuple[str, int], ...] = ()
    broker_port_base: int = 19092
    broker_ports: tuple[tuple[int, int], ...] = ()   # explicit (node id, port) listeners
    max_frame_bytes: int = 100 * 2**20      # Kafka's socket.request.max.bytes
    max_in_flight: int = 1000                # per connection, before reading pauses
    group: GroupConfig = GroupConfig()

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host
