"""Workload 5, fetch offsets: G groups each hold committed offsets for N partitions;
C clients fetch a whole group's N partitions per OffsetFetch in a closed loop (round-robin
over the groups); fetches/s, partitions/s, p50/p99 and the target's CPU per fetch
(`bench/cpu.py`) over the window. Measured at two
versions, in turn: v5 (one group per request, as kafka-python and aiokafka send) and v9
(KIP-709's groups array, as the Java client and librdkafka send).

Each client sends a group's fetch to that group's coordinator, as FindCoordinator (asked
per client and group before the clock starts) names it: on its own connection when that is
the target's address, else on one more it opens to that coordinator, so a client whose
groups have two coordinators has two connections, still one fetch in flight.

Every client decodes its first answer per group and one in `VERIFY_EVERY` fully and checks
each offset; the rest are checked by group error code and size (an answer of the same size
carries the same partitions), so decoding 1 k partitions in Python does not cap the rate.
"""

from __future__ import annotations

import asyncio
import functools
import time

from kafka.protocol.api_key import ApiKey

from coordinator.bench import messages
from coordinator.bench.context import Context
from coordinator.bench.cpu import Cpu, cpu_in_window, per_request
from coordinator.bench.member import TOPIC, BenchError
from coordinator.bench.router import Router
from coordinator.bench.stats import Figure, Latencies
from coordinator.bench.wire import BenchConnection, Template

VERIFY_EVERY = 64
COMMIT_CHUNK = 250


async def run(ctx: Context) -> list[Figure]:
    s = ctx.sizes
    base = f"fetch offsets {s.fetch_partitions} partitions x {s.fetch_groups} groups, {s.fetch_clients} clients"
    figures: list[Figure] = []
    async with ctx.launch() as target:
        await target.create_topic(TOPIC, max(s.commit_partitions, s.fetch_partitions))
        groups = [ctx.group_name("fetch", g) for g in range(s.fetch_groups)]
        expected = {group: 1_000 + g for g, group in enumerate(groups)}
        routers = [Router(conn) for conn in await target.connections(s.fetch_clients)]
        try:
            await _commit_all(routers[0], expected, s.fetch_partitions)
            # Each client's connection to each group's coordinator, found before the clock starts.
            routes = [{group: await router.connection(group) for group in groups} for router in routers]
            for version in (messages.VERSIONS[ApiKey.OffsetFetch], messages.OFFSET_FETCH_GROUPS_VERSION):
                label = f"{base}, v{version}"
                fetches, latencies, cpu = await _measure(ctx, target.pid, routes, groups, expected, version)
                note = f"{fetches} OffsetFetches in {s.duration_s:g} s"
                figures += [
                    Figure(f"{label}: fetches/s", fetches / s.duration_s, "/s", "higher", target.config, note),
                    Figure(f"{label}: partitions/s", fetches * s.fetch_partitions / s.duration_s, "/s", "higher",
                           target.config, note),
                    Figure(f"{label}: p50", latencies.percentile_ms(50), "ms", "lower", target.config, note),
                    Figure(f"{label}: p99", latencies.percentile_ms(99), "ms", "lower", target.config, note),
                    per_request(f"{label}: target CPU per OffsetFetch", cpu, fetches, target.config),
                ]
        finally:
            for router in routers:
                router.close()
    return figures


async def _measure(ctx: Context, pid: int | None, routes: list[dict[str, BenchConnection]], groups: list[str],
                   expected: dict[str, int], version: int) -> tuple[int, Latencies, Cpu | None]:
    s = ctx.sizes
    templates = {}
    for group in groups:
        request = messages.offset_fetch_request(group, TOPIC, s.fetch_partitions, version=version)
        templates[group] = Template(messages.encode(request, 0))
    latencies = Latencies()
    counts = [0]
    start = time.perf_counter()
    measure_from = start + s.warmup_s
    end = measure_from + s.duration_s
    _, cpu = await asyncio.gather(asyncio.gather(*(
        _client(routes[i], groups[i % len(groups):] + groups[:i % len(groups)], templates, expected,
                s.fetch_partitions, version, measure_from, end, latencies, counts)
        for i in range(len(routes)))), cpu_in_window(pid, measure_from, end))
    return counts[0], latencies, cpu


async def _commit_all(router: Router, expected: dict[str, int], partitions: int) -> None:
    """Commit each group's offset to every partition, in requests of COMMIT_CHUNK partitions,
    each to the group's coordinator."""
    for group, offset in expected.items():
        for low in range(0, partitions, COMMIT_CHUNK):
            count = min(COMMIT_CHUNK, partitions - low)
            request = messages.offset_commit_request(group, TOPIC, count, offset)
            for p, partition in enumerate(request.topics[0].partitions):
                partition.partition_index = low + p
            payload = await router.request(group, functools.partial(messages.encode, request),
                                           messages.offset_commit_error)
            answered, failed = messages.offset_commit_errors(payload)
            if failed or answered != count:
                raise BenchError(f"[group={group}] set-up commit: {failed} of {answered} partitions failed")


def _verify(payload: bytes, group: str, offset: int, partitions: int, version: int) -> None:
    error, topics = messages.decode_offset_fetch(payload, version)
    got = {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in topics for p in t.partitions}
    want = {(TOPIC, p): (offset, 0) for p in range(partitions)}
    if error or got != want:
        wrong = [k for k in want if got.get(k) != want[k]][:3]
        raise BenchError(f"[group={group}] OffsetFetch v{version} answered error {error}, "
                         f"{len(wrong)}+ partitions wrong, e.g. {[(k, got.get(k)) for k in wrong]}")


async def _client(conns: dict[str, BenchConnection], groups: list[str], templates: dict[str, Template],
                  expected: dict[str, int], partitions: int, version: int, measure_from: float, end: float,
                  latencies: Latencies, counts: list[int]) -> None:
    sizes: dict[str, int] = {}
    turn = 0
    while True:
        group = groups[turn % len(groups)]
        turn += 1
        conn = conns[group]
        cid = conn.next_correlation_id()
        sent = time.perf_counter_ns()
        payload = await conn.send(templates[group].frame(cid), cid)
        now_ns = time.perf_counter_ns()
        if group not in sizes or turn % VERIFY_EVERY == 0:
            _verify(payload, group, expected[group], partitions, version)
            sizes[group] = len(payload)
        elif messages.offset_fetch_error(payload, version) or len(payload) != sizes[group]:
            raise BenchError(f"[group={group}] OffsetFetch v{version} answered error "
                             f"{messages.offset_fetch_error(payload, version)} "
                             f"in {len(payload)} bytes (verified answers had {sizes[group]})")
        now = now_ns / 1e9
        if now >= end:
            return
        if now >= measure_from:
            latencies.add(now_ns - sent)
            counts[0] += 1
