"""The classic group protocol (Kafka's `group/classic/`): `ClassicGroup` and its states,
the `Membership` manager, the JoinGroup, SyncGroup, Heartbeat and LeaveGroup rules and
their answers. Imports nothing from `coordinator.group.consumer`: where the two protocols
meet (migration, classic members of a consumer group) lives beside both, in `group/`."""
