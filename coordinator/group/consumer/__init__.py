"""The KIP-848 consumer group protocol (Kafka's `group/modern/consumer/`): `ConsumerGroup`
and its replay, the `ConsumerGroups` manager, reconciliation, the server-side assignors
and the embedded consumer protocol. Imports nothing from `coordinator.group.classic`:
where the two protocols meet lives beside both, in `group/`."""
