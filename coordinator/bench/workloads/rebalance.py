"""Workload 2, rebalance: in a stable group of N members one follower sends LeaveGroup;
time until every other member is synced on the new generation.

Measured from the LeaveGroup, and from the last JoinGroup the remaining members sent
(the second leaves out how long they took to learn of the rebalance through their
heartbeats, which is the client's interval, not the coordinator's work).
"""

from __future__ import annotations

from coordinator.bench.context import Context
from coordinator.bench.member import BenchError
from coordinator.bench.stats import Figure, not_measured
from coordinator.bench.workloads.groups import form_groups


async def run(ctx: Context) -> list[Figure]:
    size = ctx.sizes.rebalance_members
    from_leave = f"rebalance {size}: LeaveGroup to all others synced"
    from_rejoin = f"rebalance {size}: last JoinGroup to all others synced"
    async with ctx.launch() as target:
        try:
            swarm, (stable,) = await form_groups(ctx, target, [ctx.group_name("rebalance", size)], size)
        except (TimeoutError, BenchError) as exc:
            return [not_measured(m, "ms", "lower", f"group did not form: {exc}", target.config)
                    for m in (from_leave, from_rejoin)]
        try:
            phase, left_ns = await swarm.one_leaves(stable.generation + 1, ctx.sizes.timeout_s)
        except (TimeoutError, BenchError) as exc:
            return [not_measured(m, "ms", "lower", str(exc), target.config) for m in (from_leave, from_rejoin)]
        finally:
            await swarm.close()
    note = (f"generation {stable.generation} to {phase.generation}, "
            f"heartbeat every {ctx.sizes.heartbeat_interval_ms} ms")
    return [
        Figure(from_leave, (phase.settled_ns - left_ns) / 1e6, "ms", "lower", target.config, note),
        Figure(from_rejoin, (phase.settled_ns - phase.last_join_ns) / 1e6, "ms", "lower", target.config, note),
    ]

