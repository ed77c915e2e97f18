"""Workload 1, join: N members join one new group at once; time from the first request
about the group (a member's FindCoordinator, which every client sends before it joins) to
the SyncGroup response that leaves all of them synced on one generation.

Also reported: the same end measured from the last JoinGroup sent (the members' final
rejoin), which leaves out how long members took to notice a rebalance (their heartbeat
interval) and keeps what the coordinator itself spends.

Each member's connection to the target's address is opened before the clock starts. Its
FindCoordinator goes there; when the answer names another address (a multi-process kgc,
a Kafka cluster), the member connects to that coordinator then, inside the timed phase, as
a real client does, and the connect counts in "FindCoordinator to all synced". On a target
that coordinates every group itself no connection is opened in the phase.

All sizes run on one target, after a one-member warm-up group: a coordinator that has
just started pays for first use (kgc compiles its codecs on the first request of each
version: ~15 ms on the first join), which is not what a join costs. Each group leaves
before the next size starts.
"""

from __future__ import annotations

from coordinator.bench.context import Context
from coordinator.bench.member import BenchError
from coordinator.bench.stats import Figure, not_measured
from coordinator.bench.targets import Target
from coordinator.bench.workloads.groups import form_groups, open_swarm


async def run(ctx: Context) -> list[Figure]:
    figures = []
    async with ctx.launch() as target:
        warm_up, _ = await form_groups(ctx, target, [ctx.group_name("join-warmup", 0)], 1)
        await warm_up.leave()
        await warm_up.close()
        for size in ctx.sizes.join_members:
            figures += await _join(ctx, target, size)
    return figures


async def _join(ctx: Context, target: Target, size: int) -> list[Figure]:
    first = f"join {size}: FindCoordinator to all synced"
    last = f"join {size}: last JoinGroup to all synced"
    swarm, (phase,) = await open_swarm(ctx, target, [ctx.group_name("join", size)], size)
    try:
        swarm.start()
        await swarm.until([phase], ctx.sizes.timeout_s)
        settled = phase.result()
    except (TimeoutError, BenchError) as exc:
        return [not_measured(m, "ms", "lower", str(exc), target.config) for m in (first, last)]
    finally:
        await swarm.leave()
        await swarm.close()
    joins = sum(m.joins_sent for m in swarm.members)
    note = (f"generation {settled.generation}, {joins} JoinGroups, "
            f"heartbeat every {ctx.sizes.heartbeat_interval_ms} ms")
    return [
        Figure(first, (settled.settled_ns - settled.first_ns) / 1e6, "ms", "lower", target.config, note),
        Figure(last, (settled.settled_ns - settled.last_join_ns) / 1e6, "ms", "lower", target.config, note),
    ]
