"""Workload 3, heartbeat: M members in stable groups of `heartbeat_group_size` heartbeat
as fast as the target answers (each member keeps one Heartbeat in flight, as a client
does); throughput, p50/p99 round-trip latency and the target's CPU per heartbeat
(`bench/cpu.py`) over the measured window, after a warm-up, for each M in
`heartbeat_members` on a fresh target.

A heartbeat answered with an error still counts as a round trip but is reported: it
means a group was rebalancing, and the figure would not be steady-state.

Each member heartbeats on its connection to its group's coordinator, as FindCoordinator
named it while the groups formed (before the window).
"""

from __future__ import annotations

import asyncio
import time

from coordinator.bench import messages
from coordinator.bench.context import Context
from coordinator.bench.cpu import cpu_in_window, per_request
from coordinator.bench.member import BenchError, Member
from coordinator.bench.stats import Figure, Latencies, not_measured
from coordinator.bench.workloads.groups import form_groups


async def run(ctx: Context) -> list[Figure]:
    figures: list[Figure] = []
    for members in ctx.sizes.heartbeat_members:
        figures += await _run_size(ctx, members)
    return figures


async def _run_size(ctx: Context, members: int) -> list[Figure]:
    s = ctx.sizes
    per_group = min(members, s.heartbeat_group_size)
    group_count = max(1, members // per_group)
    label = f"heartbeat {group_count * per_group} members in {group_count} groups"
    names = (f"{label}: heartbeats/s", f"{label}: p50", f"{label}: p99", f"{label}: target CPU per heartbeat")
    async with ctx.launch() as target:
        try:
            groups = [ctx.group_name("heartbeat", g) for g in range(group_count)]
            swarm, _ = await form_groups(ctx, target, groups, per_group)
        except (TimeoutError, BenchError) as exc:
            return [not_measured(n, u, b, f"groups did not form: {exc}", target.config)
                    for n, u, b in zip(names, ("/s", "ms", "ms", "µs"), ("higher", "lower", "lower", "lower"),
                                       strict=True)]
        try:
            await swarm.stop()
            latencies = Latencies()
            counts = [0, 0]  # answered in the window, with an error
            start = time.perf_counter()
            measure_from = start + s.warmup_s
            end = measure_from + s.duration_s
            _, cpu = await asyncio.gather(
                asyncio.gather(*(_flat_out(m, measure_from, end, latencies, counts) for m in swarm.members)),
                cpu_in_window(target.pid, measure_from, end))
        finally:
            await swarm.close()
    answered, failed = counts
    note = f"{answered} heartbeats in {s.duration_s:g} s, {failed} with an error"
    return [
        Figure(names[0], answered / s.duration_s, "/s", "higher", target.config, note),
        Figure(names[1], latencies.percentile_ms(50), "ms", "lower", target.config, note),
        Figure(names[2], latencies.percentile_ms(99), "ms", "lower", target.config, note),
        per_request(names[3], cpu, answered, target.config),
    ]


async def _flat_out(member: Member, measure_from: float, end: float, latencies: Latencies,
                    counts: list[int]) -> None:
    template = messages.heartbeat_template(member.group, member.generation, member.member_id)
    measure_from_ns = int(measure_from * 1e9)
    heartbeat_error = messages.heartbeat_error

    def answered(payload: bytes, sent_ns: int, now_ns: int) -> None:
        if now_ns >= measure_from_ns:
            latencies.add(now_ns - sent_ns)
            counts[0] += 1
            if heartbeat_error(payload):
                counts[1] += 1

    await member.conn.repeat(template, end, answered)
