"""What a workload gets to run with: sizes, a way to start its target, a scratch dir."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.bench.targets import Target


@dataclass(frozen=True)
class Sizes:
    join_members: tuple[int, ...] = (1, 10, 50, 200)
    rebalance_members: int = 50
    # Each member keeps one Heartbeat in flight, so by Little's law the mean latency is
    # members / throughput: 200 members at 30 k/s already average 6.7 ms. Both sizes are
    # reported, so the throughput and the latency targets are each seen where they apply.
    heartbeat_members: tuple[int, ...] = (50, 200)
    heartbeat_group_size: int = 10
    commit_clients: int = 8
    commit_partitions: int = 50
    commit_pipeline: int = 1
    sync_commit_clients: tuple[int, ...] = (1, 3, 8)
    sync_commit_partitions: tuple[int, ...] = (1, 2, 10)
    fetch_groups: int = 10
    fetch_partitions: int = 1000
    fetch_clients: int = 8
    load_records: tuple[int, ...] = (1_000_000,)
    memory_offsets: int = 100_000
    memory_members: int = 10_000
    memory_group_size: int = 10
    duration_s: float = 5.0
    warmup_s: float = 1.0
    heartbeat_interval_ms: int = 100
    session_timeout_ms: int = 6_000      # Kafka's and kgc's minimum
    timeout_s: float = 120.0

    @classmethod
    def tiny(cls) -> Sizes:
        """Seconds-long runs that still exercise every code path (the smoke tests)."""
        return cls(join_members=(1, 3), rebalance_members=3, heartbeat_members=(4,), heartbeat_group_size=2,
                   commit_clients=2, commit_partitions=5, sync_commit_clients=(2,), sync_commit_partitions=(2,),
                   fetch_groups=2, fetch_partitions=20, fetch_clients=2,
                   load_records=(2_000,), memory_offsets=1_000, memory_members=20, memory_group_size=2,
                   duration_s=0.3, warmup_s=0.1, timeout_s=30.0)


Launcher = Callable[..., contextlib.AbstractAsyncContextManager[Target]]


@dataclass
class Context:
    kind: str                      # "kgc", "tansu" or "external": what `launch` starts
    launch: Launcher               # launch(fsync=..., data_dir=..., spawned_at=...) -> Target
    sizes: Sizes
    work_dir: Path
    datadir_cache: Path | None = None
    repeat: int = 1                # which of the workload's runs on this target (from 1)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def group_name(self, workload: str, index: int | str) -> str:
        return f"bench-{workload}-{self.run_id}-{index}"

