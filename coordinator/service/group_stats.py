"""Group and partition gauges and rebalance metrics, sampled from the partition runtimes.

The state machine (`coordinator.group`) stays free of metrics: every
`metrics_sample_interval_ms`, and on each /metrics scrape, `GroupStatsSampler` reads each
ACTIVE partition's groups through the runtime's read path (on the partition's own
executor, so a sample is a consistent view between two events) and sets the gauges.

Rebalances are counted from generations: a classic group's generation goes up by one
each time a join phase completes (Kafka counts a rebalance at the same point), so the
count is exact even when a whole rebalance falls between two samples. A rebalance's
duration, from entering PreparingRebalance to reaching Stable or Empty, comes from the
group's state timestamps, so it is exact too, but it is observed only when a sample saw
the group in PreparingRebalance; the join phase waits for every member to rejoin (a
heartbeat interval at least), so at a one-second interval that is nearly always.
Groups present at a partition's first sample (loaded from the log) count from their
loaded generation; a group created later counts from 0.

KIP-848 consumer groups are sampled the same way: their states, their members, new
group epochs, counted from the epochs seen, and how long each epoch took to reconcile
(from its start to the group's first Stable at it, both stamped by the shard on replay,
so exact); an epoch superseded before it settled is not timed (`EpochTracker`); and
every server-side assignor run, timed by the shard.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from coordinator import metrics
from coordinator.group.classic.state import GroupState
from coordinator.periodic import run_every
from coordinator.runtime.partition_state import PartitionState

log = logging.getLogger(__name__)

_SETTLED = (GroupState.STABLE, GroupState.EMPTY)


@dataclass(frozen=True, slots=True)
class GroupSample:
    group_id: str
    state: GroupState
    generation: int
    state_since_ms: int
    members: int


def sample_shard(shard: Any) -> list[GroupSample]:
    return [GroupSample(g.group_id, g.state, g.generation, g.current_state_timestamp_ms, len(g.members))
            for g in shard.groups.values()]


@dataclass(frozen=True, slots=True)
class ConsumerGroupSample:
    group_id: str
    state: str
    epoch: int
    members: int
    epoch_since_ms: int = -1
    stable_since_ms: int | None = None


def sample_consumer_groups(shard: Any) -> tuple[list[ConsumerGroupSample], list[tuple[str, float]]]:
    """The groups, and the assignor runs (name, seconds) since the last sample, taken."""
    runs = list(shard.consumer.assignor_runs)
    shard.consumer.assignor_runs.clear()
    return [ConsumerGroupSample(g.group_id, g.state, g.group_epoch, len(g.members), g.epoch_since_ms,
                                g.stable_since_ms)
            for g in shard.consumer_groups.values()], runs


class EpochTracker:
    """New group epochs and reconciliation durations (seconds) since a partition's last
    sample; a partition's first sample is the baseline (its settled epochs are not timed)."""

    def __init__(self) -> None:
        # group -> (epoch, whether that epoch's reconciliation was timed)
        self._partitions: dict[int, dict[str, tuple[int, bool]]] = {}

    def observe(self, partition: int, samples: list[ConsumerGroupSample]) -> tuple[int, list[float]]:
        previous = self._partitions.get(partition)
        first = previous is None
        previous = previous or {}
        current: dict[str, tuple[int, bool]] = {}
        bumps = 0
        durations: list[float] = []
        for s in samples:
            seen_epoch, timed = previous.get(s.group_id, (s.epoch if first else 0, first))
            if s.epoch != seen_epoch:
                # A group deleted and created again between samples counts from 0.
                bumps += s.epoch - seen_epoch if s.epoch > seen_epoch else s.epoch
                timed = False
            if not timed and s.stable_since_ms is not None:
                durations.append(max(0, s.stable_since_ms - s.epoch_since_ms) / 1000)
                timed = True
            current[s.group_id] = (s.epoch, timed)
        self._partitions[partition] = current
        return (0 if first else bumps), durations


@dataclass(frozen=True, slots=True)
class _Seen:
    generation: int
    rebalance_started_ms: int | None


class RebalanceTracker:
    def __init__(self) -> None:
        self._partitions: dict[int, dict[str, _Seen]] = {}

    def observe(self, partition: int, samples: list[GroupSample]) -> tuple[int, list[float]]:
        """Rebalances completed and rebalance durations (seconds) since this partition's
        last sample. Groups gone from the partition are forgotten."""
        previous = self._partitions.get(partition)
        first = previous is None
        previous = previous or {}
        current: dict[str, _Seen] = {}
        rebalances = 0
        durations: list[float] = []
        for s in samples:
            seen = previous.get(s.group_id) or _Seen(s.generation if first else 0, None)
            if s.generation >= seen.generation:
                rebalances += s.generation - seen.generation
            else:
                rebalances += s.generation       # deleted and created again between samples
            started = seen.rebalance_started_ms
            if s.state is GroupState.PREPARING_REBALANCE:
                if started is None or s.generation != seen.generation:
                    started = s.state_since_ms   # a rebalance that ended unseen is not timed
            elif s.state in _SETTLED and started is not None:
                durations.append(max(0, s.state_since_ms - started) / 1000)
                started = None
            current[s.group_id] = _Seen(s.generation, started)
        self._partitions[partition] = current
        return rebalances, durations


class GroupStatsSampler:
    def __init__(self, runtime: Any, interval_ms: int, cluster: Any = None):
        self._runtime = runtime
        self._cluster = cluster
        self.interval_ms = interval_ms
        self._tracker = RebalanceTracker()
        self._epochs = EpochTracker()
        # One sample at a time: samples applied out of order would read as generations
        # going back.
        self._lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="group-stats")

    async def close(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def sample(self) -> None:
        async with self._lock:
            runtime = self._runtime
            states = [runtime.partition_state(p) for p in range(runtime.num_partitions)]
            metrics.partition_states((s.value for s in PartitionState), Counter(s.value for s in states))
            active = [p for p, state in enumerate(states) if state is PartitionState.ACTIVE]
            by_state: Counter[GroupState] = Counter()
            members = 0
            for partition, outcome in await self._read_active(active, sample_shard):
                rebalances, durations = self._tracker.observe(partition, outcome)
                metrics.REBALANCES.inc(rebalances)
                for seconds in durations:
                    metrics.REBALANCE_SECONDS.observe(seconds)
                by_state.update(s.state for s in outcome)
                members += sum(s.members for s in outcome)
            for state in GroupState:
                metrics.GROUPS.labels(state.value).set(by_state[state])
            metrics.GROUP_MEMBERS.set(members)
            await self._sample_consumer_groups(active)
            if self._cluster is not None:
                metrics.upstream_state(self._cluster.reachable, len(self._cluster.brokers))

    async def _read_active(self, active: list[int], op) -> list[tuple[int, Any]]:
        """`op` on each active partition's shard; a partition that fails the read is skipped."""
        outcomes = await asyncio.gather(*(self._runtime.read(p, op) for p in active), return_exceptions=True)
        read = []
        for partition, outcome in zip(active, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.debug("partition %d not sampled: %r", partition, outcome)
            else:
                read.append((partition, outcome))
        return read

    async def _sample_consumer_groups(self, active: list[int]) -> None:
        by_state: Counter[str] = Counter()
        members = 0
        for partition, (outcome, assignor_runs) in await self._read_active(active, sample_consumer_groups):
            for name, seconds in assignor_runs:
                metrics.CONSUMER_GROUP_ASSIGNOR_SECONDS.labels(name).observe(seconds)
            bumps, durations = self._epochs.observe(partition, outcome)
            metrics.CONSUMER_GROUP_EPOCHS.inc(bumps)
            for seconds in durations:
                metrics.CONSUMER_GROUP_RECONCILIATION_SECONDS.observe(seconds)
            by_state.update(s.state for s in outcome)
            members += sum(s.members for s in outcome)
        for state in metrics.CONSUMER_GROUP_STATES:
            metrics.CONSUMER_GROUPS.labels(state).set(by_state[state])
        metrics.CONSUMER_GROUP_MEMBERS.set(members)

    async def _run(self) -> None:
        await run_every(self.interval_ms, self._stopping, self.sample, "group stats sample")
