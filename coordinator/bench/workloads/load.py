"""Workload 6, load: start-up replay of a data dir of N records.

kgc is started on a generated data dir (`datadir`), and the clock runs from the spawn of
the process until every one of the 50 partitions answers an OffsetFetch with something
other than COORDINATOR_LOAD_IN_PROGRESS. Each probe goes to its group's coordinator, as
FindCoordinator names it, inside the timed span (a client could not ask sooner); one that
answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE is asked about again at the
coordinator found anew. The same start on an empty data dir is the
baseline (interpreter start, imports, listeners); the replay rate is N records over the
difference.

Only kgc replays a `__consumer_offsets`-format data dir; other targets report n/a.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from coordinator.bench import datadir, messages
from coordinator.bench.context import Context
from coordinator.bench.member import BenchError
from coordinator.bench.router import MOVED, RETRY, Router
from coordinator.bench.stats import Figure, not_measured
from coordinator.bench.targets import Target
from coordinator.bench.wire import BenchConnection
from coordinator.partitioning import partition_for
from protocol.errors import ErrorCode

POLL_INTERVAL_S = 0.005
MIN_LOAD_RATE = 20_000  # records/s: below it a load counts as stuck, whatever the timeout


def _figures(n: int) -> tuple[str, str]:
    return f"load {n} records: spawn to all partitions loaded", f"load {n} records: replay rate"


async def run(ctx: Context) -> list[Figure]:
    if ctx.kind != "kgc":
        reason = ("keeps groups in its own storage engine (memory:// here); there is no "
                  "__consumer_offsets data dir to replay" if ctx.kind == "tansu"
                  else "an external target's start-up is not ours to time")
        return [not_measured(name, unit, better, reason)
                for n in ctx.sizes.load_records
                for name, unit, better in zip(_figures(n), ("ms", "/s"), ("lower", "higher"), strict=True)]
    cache = ctx.datadir_cache or ctx.work_dir / "datadirs"
    with tempfile.TemporaryDirectory(prefix="kgc-empty-", dir=ctx.work_dir) as empty:
        empty_ms, config = await _start_until_loaded(ctx, empty, timeout_s=ctx.sizes.timeout_s)
    figures = [Figure("load 0 records (empty data dir): spawn to all partitions loaded", empty_ms, "ms", "lower",
                      config)]
    for n in ctx.sizes.load_records:
        path = await datadir.cached(cache, n)
        spawn_to_loaded, name_rate = _figures(n)
        loaded_ms, config = await _start_until_loaded(ctx, str(path), timeout_s=max(ctx.sizes.timeout_s,
                                                                                    n / MIN_LOAD_RATE))
        replay_s = max(loaded_ms - empty_ms, 1.0) / 1000
        note = f"{datadir.GROUPS} groups x {datadir.PARTITIONS_PER_GROUP} partitions, {_size_mb(path):.0f} MB"
        figures += [Figure(spawn_to_loaded, loaded_ms, "ms", "lower", config, note),
                    Figure(name_rate, n / replay_s, "/s", "higher", config, note + "; over the empty baseline")]
    return figures


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*.log")) / 2**20


async def _start_until_loaded(ctx: Context, data_dir: str, timeout_s: float) -> tuple[float, str]:
    spawned_at: list[float] = []
    async with ctx.launch(data_dir=data_dir, spawned_at=spawned_at) as target:
        loaded_at = await _wait_all_loaded(target, timeout_s)
        return (loaded_at - spawned_at[0]) * 1000, target.config


def _probe_groups(partitions: int) -> list[str]:
    """One group name per coordinator partition."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"load-probe-{i}"
        found.setdefault(partition_for(name, partitions), name)
        i += 1
    return [found[p] for p in range(partitions)]


async def _wait_all_loaded(target: Target, timeout_s: float, partitions: int = 50) -> float:
    router = Router(await target.connect())
    try:
        waiting = _probe_groups(partitions)
        routes: dict[str, BenchConnection] = {}
        deadline = time.perf_counter() + timeout_s
        while waiting:
            if time.perf_counter() > deadline:
                raise BenchError(f"{len(waiting)} partitions still loading after {timeout_s:.0f}s")
            # Each probe to its group's coordinator; the FindCoordinators of a round go out at once.
            if missing := [group for group in waiting if group not in routes]:
                routes.update(zip(missing, await asyncio.gather(*(router.connection(g) for g in missing)),
                                  strict=True))
            futures = []
            for group in waiting:
                conn = routes[group]
                cid = conn.next_correlation_id()
                request = messages.offset_fetch_request(group, "t", 0)
                futures.append(conn.send(messages.encode(request, cid), cid))
            codes = [messages.offset_fetch_error(p) for p in await asyncio.gather(*futures)]
            now = time.perf_counter()
            unexpected = {c for c in codes if c not in (ErrorCode.NONE, *RETRY)}
            if unexpected:
                raise BenchError(f"OffsetFetch while loading answered {sorted(unexpected)}")
            for group, code in zip(waiting, codes, strict=True):
                if code in MOVED:
                    router.forget(group)
                    del routes[group]
            waiting = [g for g, c in zip(waiting, codes, strict=True) if c != ErrorCode.NONE]
            if waiting:
                await asyncio.sleep(POLL_INTERVAL_S)
        return now
    finally:
        router.close()
