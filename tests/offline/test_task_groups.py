"""How the Spark engine deals partition tasks into Spark tasks (no Spark needed)."""

from __future__ import annotations

from coordinator.offline.job import Options, PartitionTask
from coordinator.offline.spark_engine import TASKS_PER_CORE, task_groups


def tasks(n: int) -> list[PartitionTask]:
    return [PartitionTask(p, f"/data/__consumer_offsets-{p}", Options(now_ms=0)) for p in range(n)]


def test_every_partition_goes_to_exactly_one_spark_task():
    for n, cores in ((50, 2), (50, 1), (3, 2), (1, 8), (50, 64)):
        groups = task_groups(tasks(n), cores)
        assert sorted(t.partition for g in groups for t in g) == list(range(n))
        assert len(groups) == min(n, TASKS_PER_CORE * cores)
        assert all(groups)


def test_partitions_planned_largest_first_are_dealt_round_robin():
    # 50 partitions on 2 cores: 8 Spark tasks of 6 or 7 partitions, each taking one of
    # the largest, one of the next largest, and so on.
    groups = task_groups(tasks(50), 2)
    assert [len(g) for g in groups] == [7, 7, 6, 6, 6, 6, 6, 6]
    assert [t.partition for t in groups[1]] == [1, 9, 17, 25, 33, 41, 49]


def test_a_cluster_with_cores_enough_runs_one_partition_per_spark_task():
    assert [len(g) for g in task_groups(tasks(50), 16)] == [1] * 50
