"""Workload sync-commit: a consumer's synchronous commit. N clients share one group; each
owns K partitions and keeps exactly one OffsetCommit of them in flight, as a consumer does
with `commit(asynchronous=False)` after each batch; commits/s, p50/p99 round trip and
the target's CPU per commit (`bench/cpu.py`) for every N in `sync_commit_clients` and K in
`sync_commit_partitions`.

At the end of each (N, K) every client reads its partitions back with OffsetFetch (the
`committed()` a consumer calls) and checks it gets the last offset it committed.

Each client sends to the group's coordinator, as FindCoordinator (asked once per client,
before the clock starts) names it: its own connection when that is the target's address,
else one it opens to the coordinator then. Its first commit, of offset 0, is sent then
too, and sent again while the coordinator answers that it cannot take it yet (loading, or
a topic just created that its broker does not know yet).

kgc runs with fsync `always` and `never`. "fsync cost / kgc fsync" says how much longer
a commit waits with `always` than with `never` (p50 against p50), in units of the mean
fsync kgc itself did during that run (its `kgc_log_fsync_duration_seconds`, read before
and after): 1.0 means the commit path adds nothing to the fsync itself. That is the
yardstick because a shared disk's fsync time swings by an order of magnitude within
seconds, so an fsync timed at another moment says little about the ones kgc waited for.
The disk's own fsync of a small append, timed right before and after each run
(`disk.FsyncProbe`) with N threads appending to one file at once as the N clients'
commits to their group's one partition do, is reported beside it ("fsync cost / disk
fsync").
"""

from __future__ import annotations

import asyncio
import functools
import time

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from coordinator.bench import messages
from coordinator.bench.context import Context
from coordinator.bench.cpu import Cpu, cpu_in_window, per_request
from coordinator.bench.disk import FsyncProbe
from coordinator.bench.member import BenchError
from coordinator.bench.router import Router, error_name
from coordinator.bench.stats import Figure, Latencies, not_measured
from coordinator.bench.wire import BenchConnection

FSYNC_POLICIES = ("always", "never")
DISK_PROBES = 100     # fsyncs timed before, and again after, each fsync=always run

# A topic of its own, sized for this workload: Kafka refuses commits to partitions it lacks,
# and the commit workload's topic has another size.
TOPIC = "bench-sync-commit"
_NO_P50 = "no p50 to compute it from: a run timed nothing"


def label(clients: int, partitions: int) -> str:
    return f"sync commit {clients} clients x {partitions} partitions"


async def run(ctx: Context) -> list[Figure]:
    s = ctx.sizes
    figures = []
    p50s: dict[tuple[str | None, int, int], float | None] = {}
    disk: dict[tuple[int, int], Latencies] = {}
    own_fsync_ms: dict[tuple[int, int], float | None] = {}
    with FsyncProbe(ctx.work_dir) as probe:
        for fsync in FSYNC_POLICIES if ctx.kind == "kgc" else (None,):
            options = {"fsync": fsync} if fsync else {}
            async with ctx.launch(**options) as target:
                await target.create_topic(TOPIC, max(s.sync_commit_clients) * max(s.sync_commit_partitions))
                for n in s.sync_commit_clients:
                    for k in s.sync_commit_partitions:
                        group = ctx.group_name("sync-commit", f"{fsync}-{n}x{k}")
                        if fsync == "always":
                            disk[n, k] = await asyncio.to_thread(probe.latencies, DISK_PROBES, None, n)
                            fsyncs_before = await _kgc_fsyncs(target.metrics_url)
                        latencies, requests, cpu = await _measure(ctx, target, group, n, k)
                        if fsync == "always":
                            own_fsync_ms[n, k] = _mean_ms(fsyncs_before, await _kgc_fsyncs(target.metrics_url))
                            await asyncio.to_thread(probe.latencies, DISK_PROBES, disk[n, k], n)
                        note = f"{requests} OffsetCommits in {s.duration_s:g} s, one in flight per client"
                        figures += [
                            Figure(f"{label(n, k)}: commits/s", requests / s.duration_s, "/s", "higher",
                                   target.config, note),
                            Figure(f"{label(n, k)}: p50", latencies.percentile_ms(50), "ms", "lower",
                                   target.config, note),
                            Figure(f"{label(n, k)}: p99", latencies.percentile_ms(99), "ms", "lower",
                                   target.config, note),
                            per_request(f"{label(n, k)}: target CPU per commit", cpu, requests, target.config),
                        ]
                        p50s[fsync, n, k] = latencies.percentile_ms(50)
    if not disk:
        return figures
    config = "kgc fsync=always, the disk's fsync timed around each run"
    for (n, k), probes in disk.items():
        # A p50 is None where nothing was timed: no commit answered inside a run's measured
        # window, or more writers than DISK_PROBES, each of which then probes nothing.
        disk_p50 = probes.percentile_ms(50)
        always, never = p50s["always", n, k], p50s["never", n, k]
        extra = None if always is None or never is None else always - never
        own = own_fsync_ms[n, k]
        kgc_cost, disk_cost = f"{label(n, k)}: fsync cost / kgc fsync", f"{label(n, k)}: fsync cost / disk fsync"
        if own:
            figures += [
                Figure(f"{label(n, k)}: kgc fsync mean", own, "ms", "lower", config),
                Figure(kgc_cost, extra / own, "x", "lower", config,
                       f"p50 always - p50 never = {extra:.3f} ms; kgc's mean fsync in the run {own:.3f} ms")
                if extra is not None else not_measured(kgc_cost, "x", "lower", _NO_P50, config),
            ]
        figures += [
            Figure(f"{label(n, k)}: disk fsync p50", disk_p50, "ms", "lower", config,
                   f"{n} writer(s) appending to one file at once"),
            Figure(disk_cost, extra / disk_p50, "x", "lower", config,
                   f"p50 always - p50 never = {extra:.3f} ms; disk fsync p50 {disk_p50:.3f} ms with {n} writer(s)")
            if extra is not None and disk_p50 is not None else not_measured(disk_cost, "x", "lower", _NO_P50, config),
        ]
    return figures


async def _measure(ctx: Context, target, group: str, clients: int,
                   partitions: int) -> tuple[Latencies, int, Cpu | None]:
    s = ctx.sizes
    routers = [Router(conn) for conn in await target.connections(clients)]
    latencies = Latencies()
    counts = [0]
    try:
        encoders = [messages.OffsetCommitEncoder(group, TOPIC, partitions, i * partitions) for i in range(clients)]
        conns = await asyncio.gather(*(_first_commit(router, group, encoder)
                                       for router, encoder in zip(routers, encoders, strict=True)))
        start = time.perf_counter()
        measure_from = start + s.warmup_s
        end = measure_from + s.duration_s
        last, cpu = await asyncio.gather(asyncio.gather(*(
            _client(conns[i], encoders[i], measure_from, end, latencies, counts)
            for i in range(clients))), cpu_in_window(target.pid, measure_from, end))
        for i in range(clients):
            await _check_committed(routers[i], group, partitions, i * partitions, last[i])
    finally:
        for router in routers:
            router.close()
    return latencies, counts[0], cpu


async def _first_commit(router: Router, group: str, encoder: messages.OffsetCommitEncoder) -> BenchConnection:
    """Offset 0, committed before the clock starts, retried while the coordinator cannot
    take it yet (`Router.request`); the connection to the group's coordinator."""
    payload = await router.request(group, lambda cid: encoder.frame(cid, 0), messages.offset_commit_error)
    _check_answer(payload, encoder, 0)
    return await router.connection(group)


def _check_answer(payload: bytes, encoder: messages.OffsetCommitEncoder, offset: int) -> None:
    answered, failed = messages.offset_commit_errors(payload)
    if failed or answered != encoder.partitions:
        raise BenchError(f"commit of offset {offset}: {failed} of {answered} partitions failed, the first with "
                         f"{error_name(messages.offset_commit_error(payload))}")


async def _client(conn: BenchConnection, encoder: messages.OffsetCommitEncoder, measure_from: float, end: float,
                  latencies: Latencies, counts: list[int]) -> int:
    """Commit offsets 1, 2, 3, ... one at a time until `end`; the last offset committed."""
    offset = 0
    while True:
        offset += 1
        cid = conn.next_correlation_id()
        sent = time.perf_counter_ns()
        payload = await conn.send(encoder.frame(cid, offset), cid)
        now_ns = time.perf_counter_ns()
        _check_answer(payload, encoder, offset)
        now = now_ns / 1e9
        if now >= end:
            return offset
        if now >= measure_from:
            latencies.add(now_ns - sent)
            counts[0] += 1


async def _check_committed(router: Router, group: str, partitions: int, first: int, offset: int) -> None:
    request = messages.offset_fetch_request(group, TOPIC, partitions, first)
    payload = await router.request(group, functools.partial(messages.encode, request), messages.offset_fetch_error)
    error, topics = messages.decode_offset_fetch(payload)
    got = {p.partition_index: (p.committed_offset, p.error_code) for t in topics for p in t.partitions}
    want = {p: (offset, 0) for p in range(first, first + partitions)}
    if error or got != want:
        raise BenchError(f"[group={group}] committed() after the loop: error {error}, got {got}, want {want}")


async def _kgc_fsyncs(metrics_url: str | None) -> tuple[float, float] | None:
    """kgc's fsyncs so far: (seconds in fsync, fsyncs), from its Prometheus endpoint."""
    if metrics_url is None:
        return None
    async with aiohttp.ClientSession() as session, session.get(metrics_url) as response:
        text = await response.text()
    samples = {sample.name: sample.value for family in text_string_to_metric_families(text)
               if family.name == "kgc_log_fsync_duration_seconds" for sample in family.samples}
    return samples.get("kgc_log_fsync_duration_seconds_sum", 0.0), samples.get("kgc_log_fsync_duration_seconds_count", 0.0)


def _mean_ms(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * 1000
