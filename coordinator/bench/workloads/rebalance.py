"""Workload 2, rebalance: in a stable group of N members one follower sends LeaveGroup;
time until every other member is synced on the new generation. Then a new member joins
the N-1 that are left; time until all N are synced on the generation after.

Each is measured from the event (the LeaveGroup; the newcomer's FindCoordinator, which
it sends before its first JoinGroup and its KIP-394 round for a member id), and from the
last JoinGroup of the rebalance: the second leaves out how long the members took to learn
of the rebalance through their heartbeats, which is the client's interval, not the
coordinator's work.

The newcomer's connection to the target's address is opened before the clock starts; when
its FindCoordinator names another address, it connects to that coordinator inside the
timed phase, as a real client does, and the connect counts in "a new member's
FindCoordinator to all synced".
"""

from __future__ import annotations

from coordinator.bench.context import Context
from coordinator.bench.member import BenchError, Member
from coordinator.bench.stats import Figure, not_measured
from coordinator.bench.workloads.groups import form_groups


async def run(ctx: Context) -> list[Figure]:
    size = ctx.sizes.rebalance_members
    from_leave = f"rebalance {size}: LeaveGroup to all others synced"
    from_rejoin = f"rebalance {size}: last JoinGroup to all others synced"
    from_newcomer = f"rebalance {size}: a new member's FindCoordinator to all synced"
    from_last_join = f"rebalance {size}: last JoinGroup to all synced, after a new member"
    metrics = (from_leave, from_rejoin, from_newcomer, from_last_join)
    group = ctx.group_name("rebalance", size)
    async with ctx.launch() as target:
        try:
            swarm, (stable,) = await form_groups(ctx, target, [group], size)
        except (TimeoutError, BenchError) as exc:
            return [not_measured(m, "ms", "lower", f"group did not form: {exc}", target.config) for m in metrics]
        conns = []
        try:
            # Opened before the clock starts: the rows time the coordinator, not a connect
            # (unless the coordinator is at another address: see the docstring).
            conns = await target.connections(1)
            newcomer = Member(conns[0], group, session_timeout_ms=ctx.sizes.session_timeout_ms,
                              rebalance_timeout_ms=ctx.sizes.session_timeout_ms,
                              heartbeat_interval_ms=ctx.sizes.heartbeat_interval_ms)
            formed = stable.result()
            left, left_ns = await swarm.one_leaves(formed.generation + 1, ctx.sizes.timeout_s)
            shrunk = left.result()
            joined, joined_ns = await swarm.one_joins(newcomer, shrunk.generation + 1, ctx.sizes.timeout_s)
            grown = joined.result()
        except (TimeoutError, BenchError) as exc:
            return [not_measured(m, "ms", "lower", str(exc), target.config) for m in metrics]
        finally:
            await swarm.close()
            for conn in conns:      # closed by the swarm too once the newcomer joined it
                conn.close()
    note = (f"generations {formed.generation} to {shrunk.generation} (a leave) to {grown.generation} "
            f"(a join), heartbeat every {ctx.sizes.heartbeat_interval_ms} ms")
    return [
        Figure(from_leave, (shrunk.settled_ns - left_ns) / 1e6, "ms", "lower", target.config, note),
        Figure(from_rejoin, (shrunk.settled_ns - shrunk.last_join_ns) / 1e6, "ms", "lower", target.config, note),
        Figure(from_newcomer, (grown.settled_ns - joined_ns) / 1e6, "ms", "lower", target.config, note),
        Figure(from_last_join, (grown.settled_ns - grown.last_join_ns) / 1e6, "ms", "lower", target.config, note),
    ]
