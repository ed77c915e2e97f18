"""The services over the partition runtime (Kafka's `GroupCoordinatorService` and what runs
beside it): `group_coordinator` routes each group API to its partition and maps errors to
answers; `adoption` takes a group over from the upstream on its first use; `group_stats`
samples the shards for metrics; `cleaner_schedule` runs the online cleaner;
`deleted_topics` deletes the offsets of topics the upstream deleted. The runtime
below them knows no group type."""
