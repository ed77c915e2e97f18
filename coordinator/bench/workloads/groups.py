"""Forming groups of simulated members on a target: shared by the membership workloads."""

from __future__ import annotations

from coordinator.bench.context import Context
from coordinator.bench.member import Member, Phase, Swarm
from coordinator.bench.targets import Target


async def open_swarm(ctx: Context, target: Target, groups: list[str], members_per_group: int, *,
                     session_timeout_ms: int | None = None,
                     heartbeat_interval_ms: int | None = None) -> tuple[Swarm, list[Phase]]:
    """One connection per member to the target's address (a parked JoinGroup blocks its
    connection; a member opens one more to its coordinator when FindCoordinator names
    another address); members are created, not started, with one phase per group
    expecting all of its members."""
    session = session_timeout_ms or ctx.sizes.session_timeout_ms
    interval = heartbeat_interval_ms or ctx.sizes.heartbeat_interval_ms
    conns = await target.connections(len(groups) * members_per_group)
    members = [Member(conns[g * members_per_group + i], group, session_timeout_ms=session,
                      rebalance_timeout_ms=session, heartbeat_interval_ms=interval)
               for g, group in enumerate(groups) for i in range(members_per_group)]
    phases = []
    for g in range(len(groups)):
        in_group = members[g * members_per_group:(g + 1) * members_per_group]
        phase = Phase(in_group)
        for member in in_group:
            member.phase = phase
        phases.append(phase)
    return Swarm(members), phases


async def form_groups(ctx: Context, target: Target, groups: list[str], members_per_group: int,
                      **kw) -> tuple[Swarm, list[Phase]]:
    """Members joined, synced on one generation per group, and heartbeating."""
    swarm, phases = await open_swarm(ctx, target, groups, members_per_group, **kw)
    try:
        swarm.start()
        await swarm.until(phases, ctx.sizes.timeout_s)
    except BaseException:
        await swarm.close()
        raise
    return swarm, phases
