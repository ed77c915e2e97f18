"""Workload 7, memory: resident memory of the target per committed offset and per member.

RSS is VmRSS from /proc/<pid>/status, so the target's pid must be known. Each figure
comes from a fresh target: RSS after a warm-up (the code paths and allocator pools are in
use, as in a server that has been up), then again after the load, the difference over
the count. A running target (`HOST:PORT`) is measured on the workload's first run only:
memory an earlier run freed is reused without RSS growing, so a second run would measure
next to nothing. Run memory first, or alone, for a running target's figures.

- offsets: `memory_offsets` distinct (group, partition) offsets, groups of
  `OFFSETS_PER_GROUP` partitions, each group's sent to its coordinator (FindCoordinator);
- members: `memory_members` members in groups of `memory_group_size`, each on its own
  connection and heartbeating like a client (every `HEARTBEAT_INTERVAL_MS`), so the figure
  includes what the target spends per connection;
- idle connections: as many connections that only asked ApiVersions, which is the
  connection part of the member figure; the member's own state is the difference.
"""

from __future__ import annotations

import asyncio
import functools

from coordinator.bench import messages
from coordinator.bench.context import Context
from coordinator.bench.member import BenchError
from coordinator.bench.router import Router
from coordinator.bench.stats import Figure, not_measured
from coordinator.bench.targets import Target, rss_bytes
from coordinator.bench.workloads.groups import form_groups

OFFSETS_PER_GROUP = 1_000
COMMIT_CHUNK = 250
# A topic of its own: the other workloads' topic may exist with fewer partitions, and Kafka
# refuses a commit for a partition its metadata does not have.
TOPIC = "bench-memory"
HEARTBEAT_INTERVAL_MS = 3_000   # Kafka's default heartbeat.interval.ms
SESSION_TIMEOUT_MS = 20_000


async def run(ctx: Context) -> list[Figure]:
    s = ctx.sizes
    offsets_name = f"memory: RSS per committed offset ({s.memory_offsets} offsets)"
    member_name = f"memory: RSS per member incl. its connection ({s.memory_members} members)"
    conn_name = f"memory: RSS per idle connection ({s.memory_members} connections)"
    state_name = "memory: RSS per member, connection excluded"
    figures = []
    async with ctx.launch() as target:
        why = ("the target's pid is unknown (give --pid)" if target.pid is None
               else "a running target is measured on the first run only" if ctx.kind == "external" and ctx.repeat > 1
               else None)
        if why is not None:
            return [not_measured(n, "bytes", "lower", why, target.config)
                    for n in (offsets_name, member_name, conn_name, state_name)]
        figures.append(await _per_offset(ctx, target, offsets_name))
    async with ctx.launch() as target:
        per_connection = await _per_idle_connection(target, s.memory_members, conn_name)
    async with ctx.launch() as target:
        per_member = await _per_member(ctx, target, member_name)
    figures += [per_member, per_connection]
    if per_member.value is not None and per_connection.value is not None:
        figures.append(Figure(state_name, per_member.value - per_connection.value, "bytes", "lower", target.config,
                              "the two figures above, subtracted"))
    return figures


def _rss(target: Target) -> int:
    if target.pid is None:
        # Not reached: `run` returns early when its first launch has no pid, and launches alike after it.
        raise BenchError("the target's pid is unknown: its RSS cannot be read")
    return rss_bytes(target.pid)


async def _per_offset(ctx: Context, target: Target, name: str) -> Figure:
    await target.create_topic(TOPIC, OFFSETS_PER_GROUP)
    router = Router(await target.connect())
    try:
        await _commit(router, ctx.group_name("memory-warmup", 0), OFFSETS_PER_GROUP)
        before = _rss(target)
        groups = -(-ctx.sizes.memory_offsets // OFFSETS_PER_GROUP)
        committed = 0
        for g in range(groups):
            count = min(OFFSETS_PER_GROUP, ctx.sizes.memory_offsets - committed)
            await _commit(router, ctx.group_name("memory", g), count)
            committed += count
        after = _rss(target)
    finally:
        router.close()
    return Figure(name, (after - before) / committed, "bytes", "lower", target.config,
                  f"RSS {before / 2**20:.1f} to {after / 2**20:.1f} MiB")


async def _commit(router: Router, group: str, partitions: int) -> None:
    """The group's chunks pipelined on the connection to its coordinator (found first, once)."""
    await router.connection(group)
    requests = []
    for low in range(0, partitions, COMMIT_CHUNK):
        request = messages.offset_commit_request(group, TOPIC, min(COMMIT_CHUNK, partitions - low), 42)
        for p, partition in enumerate(request.topics[0].partitions):
            partition.partition_index = low + p
        requests.append(router.request(group, functools.partial(messages.encode, request),
                                       messages.offset_commit_error))
    for payload in await asyncio.gather(*requests):
        answered, failed = messages.offset_commit_errors(payload)
        if failed:
            raise BenchError(f"[group={group}] {failed} of {answered} partition commits failed")


async def _per_idle_connection(target: Target, count: int, name: str) -> Figure:
    warmup = await target.connections(1)
    await _api_versions(warmup)
    before = _rss(target)
    conns = await target.connections(count)
    try:
        await _api_versions(conns)
        after = _rss(target)
    finally:
        for conn in conns + warmup:
            conn.close()
    return Figure(name, (after - before) / count, "bytes", "lower", target.config,
                  f"RSS {before / 2**20:.1f} to {after / 2**20:.1f} MiB")


async def _api_versions(conns) -> None:
    async def one(conn):
        cid = conn.next_correlation_id()
        await conn.send(messages.encode(messages.api_versions_request(), cid), cid)
    await asyncio.gather(*(one(c) for c in conns))


async def _per_member(ctx: Context, target: Target, name: str) -> Figure:
    s = ctx.sizes
    size = s.memory_group_size
    groups = [ctx.group_name("memory-members", g) for g in range(-(-s.memory_members // size))]
    options = {"session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS}
    try:
        warmup, _ = await form_groups(ctx, target, [ctx.group_name("memory-warmup", 0)], size, **options)
    except (TimeoutError, BenchError) as exc:
        return not_measured(name, "bytes", "lower", f"warm-up group did not form: {exc}", target.config)
    try:
        before = _rss(target)
        try:
            swarm, _ = await form_groups(ctx, target, groups, size, **options)
        except (TimeoutError, BenchError) as exc:
            return not_measured(name, "bytes", "lower", f"groups did not form: {exc}", target.config)
        try:
            after = _rss(target)
        finally:
            await swarm.close()
    finally:
        await warmup.close()
    members = len(groups) * size
    return Figure(name, (after - before) / members, "bytes", "lower", target.config,
                  f"RSS {before / 2**20:.1f} to {after / 2**20:.1f} MiB, groups of {size}, "
                  f"heartbeat every {HEARTBEAT_INTERVAL_MS} ms")
