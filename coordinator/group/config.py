"""The group coordinator's settings, with Kafka's defaults; every duration in milliseconds.

The group layer reads only this; `coordinator.settings` loads it from flags, the
environment and a TOML file as part of `ServerConfig`.
"""

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
    # KIP-848 consumer groups (Kafka's group.consumer.*)
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")   # the first is the default
    # Kafka's group.consumer.assignment.interval.ms (KIP-1263, Kafka 4.3+): a group's target
    # assignment is computed at most once per interval; members that join meanwhile are
    # assigned by the first heartbeat after it. 0: at every change.
    consumer_assignment_interval_ms: int = 1_000
    # Kafka's group.consumer.migration.policy: whether a classic group with members becomes
    # a consumer group when a ConsumerGroupHeartbeat joins it (upgrade), and back when its
    # last consumer-protocol member leaves (downgrade). Empty groups convert regardless.
    consumer_migration_policy: str = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "downgrade")
