"""Workload 4, commit: C clients, each on its own connection and in its own group, commit
P partitions per OffsetCommit in a closed loop (`commit_pipeline` requests in flight per
client); partition-commits/s, requests/s, p50/p99 request latency and the target's CPU
per request (`bench/cpu.py`) over the window.

Commits are a simple consumer's (generation -1, no member id): group membership is not
what this measures. Each client sends its group's commits to the coordinator that
FindCoordinator (asked once, before the clock starts) names for it: its own connection
when that is the target's address, else one it opens to the coordinator then. kgc runs twice, with fsync `always` and `never`; offsets grow by one
per request, like a consumer moving forward.
"""

from __future__ import annotations

import asyncio
import time

from coordinator.bench import messages
from coordinator.bench.context import Context
from coordinator.bench.cpu import cpu_in_window, per_request
from coordinator.bench.member import TOPIC, BenchError
from coordinator.bench.router import Router
from coordinator.bench.stats import Figure, Latencies
from coordinator.bench.wire import BenchConnection

FSYNC_POLICIES = ("always", "never")


async def run(ctx: Context) -> list[Figure]:
    figures = []
    for fsync in FSYNC_POLICIES if ctx.kind == "kgc" else (None,):
        options = {"fsync": fsync} if fsync else {}
        async with ctx.launch(**options) as target:
            figures += await _measure(ctx, target)
    return figures


async def _measure(ctx: Context, target) -> list[Figure]:
    s = ctx.sizes
    label = f"commit {s.commit_clients} clients x {s.commit_partitions} partitions"
    await target.create_topic(TOPIC, max(s.commit_partitions, s.fetch_partitions))
    routers = [Router(conn) for conn in await target.connections(s.commit_clients)]
    latencies = Latencies()
    counts = [0, 0, 0]  # requests, partitions answered, partitions failed (in the window)
    try:
        groups = [ctx.group_name("commit", i) for i in range(s.commit_clients)]
        encoders = [messages.OffsetCommitEncoder(group, TOPIC, s.commit_partitions) for group in groups]
        conns = await asyncio.gather(*(r.connection(group) for r, group in zip(routers, groups, strict=True)))
        offsets = [0] * s.commit_clients
        start = time.perf_counter()
        measure_from = start + s.warmup_s
        end = measure_from + s.duration_s
        _, cpu = await asyncio.gather(
            asyncio.gather(*(_client(conns[i], encoders[i], offsets, i, measure_from, end, latencies, counts)
                             for i in range(s.commit_clients) for _ in range(s.commit_pipeline))),
            cpu_in_window(target.pid, measure_from, end))
    finally:
        for router in routers:
            router.close()
    requests, answered, failed = counts
    if failed:
        raise BenchError(f"{failed} of {answered} partition commits failed")
    note = f"{requests} OffsetCommits in {s.duration_s:g} s, {s.commit_pipeline} in flight per client"
    return [
        Figure(f"{label}: partition-commits/s", answered / s.duration_s, "/s", "higher", target.config, note),
        Figure(f"{label}: OffsetCommit requests/s", requests / s.duration_s, "/s", "higher", target.config, note),
        Figure(f"{label}: p50", latencies.percentile_ms(50), "ms", "lower", target.config, note),
        Figure(f"{label}: p99", latencies.percentile_ms(99), "ms", "lower", target.config, note),
        per_request(f"{label}: target CPU per OffsetCommit", cpu, requests, target.config),
    ]


async def _client(conn: BenchConnection, encoder: messages.OffsetCommitEncoder, offsets: list[int], index: int,
                  measure_from: float, end: float, latencies: Latencies, counts: list[int]) -> None:
    while True:
        offsets[index] += 1
        cid = conn.next_correlation_id()
        sent = time.perf_counter_ns()
        payload = await conn.send(encoder.frame(cid, offsets[index]), cid)
        now_ns = time.perf_counter_ns()
        now = now_ns / 1e9
        if now >= end:
            return
        if now >= measure_from:
            answered, failed = messages.offset_commit_errors(payload)
            latencies.add(now_ns - sent)
            counts[0] += 1
            counts[1] += answered
            counts[2] += failed
