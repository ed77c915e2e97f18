"""The compare driver: every workload against every target in turn, repeated; medians
and the kgc/other ratio per figure.

Order is workload → repeat → target, so both targets see the same machine state for a
workload and a slow spell hits both. Each workload run starts its own target (see
`targets`), so runs do not share state. A workload that fails on a target gives a
"failed: ..." figure there and the run goes on.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from kafka.protocol.api_key import ApiKey

from coordinator.bench.context import Context, Launcher, Sizes
from coordinator.bench.stats import Figure, median, not_measured
from coordinator.bench.targets import Unsupported, external, spawn_kgc, spawn_tansu
from coordinator.bench.workloads import (
    commit,
    fetch_offsets,
    heartbeat,
    join,
    load,
    memory,
    rebalance,
    sync_commit,
)

log = logging.getLogger(__name__)

_MEMBERSHIP = (ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat)

WORKLOADS: dict[str, Callable[[Context], Awaitable[list[Figure]]]] = {
    "join": join.run,
    "rebalance": rebalance.run,
    "heartbeat": heartbeat.run,
    "commit": commit.run,
    "sync-commit": sync_commit.run,
    "fetch-offsets": fetch_offsets.run,
    "load": load.run,
    "memory": memory.run,
}
# The requests each workload sends, at `messages.VERSIONS`: a target must serve them all.
REQUIRES: dict[str, tuple[ApiKey, ...]] = {
    "join": _MEMBERSHIP,
    "rebalance": (*_MEMBERSHIP, ApiKey.LeaveGroup),
    "heartbeat": _MEMBERSHIP,
    "commit": (ApiKey.OffsetCommit,),
    "sync-commit": (ApiKey.OffsetCommit, ApiKey.OffsetFetch),
    "fetch-offsets": (ApiKey.OffsetCommit, ApiKey.OffsetFetch),
    "load": (ApiKey.OffsetFetch,),
    "memory": (*_MEMBERSHIP, ApiKey.OffsetCommit),
}


@dataclass(frozen=True)
class TargetChoice:
    label: str                               # how the report names it
    kind: str                                # "kgc", "tansu" or "external"
    launcher: Callable[[Path], Launcher]     # work dir -> launch(**options)


def choose_target(spec: str, pid: int | None = None, profile_dir: Path | None = None) -> TargetChoice:
    """`kgc` or `tansu` (started here), or HOST:PORT of a running coordinator, named in the
    report by NAME when given as NAME=HOST:PORT. A kgc started here is sampled by py-spy when
    `profile_dir` is given."""
    if spec == "kgc":
        return TargetChoice("kgc", "kgc",
                            lambda work_dir: lambda **kw: spawn_kgc(work_dir, profile_dir=profile_dir, **kw))
    if spec == "kgc-tls":
        return TargetChoice("kgc-tls", "kgc", lambda work_dir: lambda **kw: spawn_kgc(
            work_dir, profile_dir=profile_dir, tls=True, **kw))
    if spec == "tansu":
        return TargetChoice("tansu", "tansu", lambda work_dir: lambda **kw: spawn_tansu(work_dir))
    label, named, address = spec.rpartition("=")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or (named and not label):
        raise ValueError(f"a target is kgc, kgc-tls, tansu, HOST:PORT or NAME=HOST:PORT, not {spec!r}")

    def launcher(work_dir: Path) -> Launcher:
        # A running target cannot be reconfigured: per-workload options do not apply.
        return lambda **kw: external(host, int(port), pid, label)
    return TargetChoice(label or address, "external", launcher)


@dataclass(frozen=True)
class Sample:
    workload: str
    repeat: int
    target: str
    figure: Figure


async def run_all(targets: list[TargetChoice], workloads: list[str], sizes: Sizes, repeats: int,
                  work_dir: Path, datadir_cache: Path | None = None, profile_dir: Path | None = None) -> list[Sample]:
    samples = []
    for name in workloads:
        for repeat in range(1, repeats + 1):
            for target in targets:
                launch = _checked(target.launcher(work_dir), REQUIRES[name])
                ctx = Context(target.kind, launch, sizes, work_dir, datadir_cache, repeat)
                started = time.perf_counter()
                try:
                    figures = await WORKLOADS[name](ctx)
                except Unsupported as exc:
                    figures = [not_measured(name, "", "", str(exc))]
                except Exception as exc:
                    log.exception("%s on %s failed", name, target.label)
                    figures = [not_measured(name, "", "", f"failed: {type(exc).__name__}: {exc}")]
                print(f"[{name}] run {repeat}/{repeats} on {target.label}: {time.perf_counter() - started:.1f} s",
                      file=sys.stderr, flush=True)
                samples += [Sample(name, repeat, target.label, f) for f in figures]
                if profile_dir is not None:
                    _label_profiles(profile_dir, f"{name}-{target.label}-r{repeat}")
    return samples


def _checked(launch: Launcher, keys: tuple[ApiKey, ...]) -> Launcher:
    @contextlib.asynccontextmanager
    async def launch_checked(**options):
        async with launch(**options) as target:
            target.require(*keys)
            yield target
    return launch_checked


def _label_profiles(profile_dir: Path, label: str) -> None:
    """Name the profiles a workload run just wrote (`kgc-<port>.*`) after the run."""
    for n, raw in enumerate(sorted(profile_dir.glob("kgc-*.raw"))):
        for path in (raw, raw.with_suffix(".seconds")):
            if path.exists():
                path.rename(profile_dir / f"{label}-{n}{path.suffix}")


def profiles_of(profile_dir: Path, workload: str) -> list[Path]:
    return sorted(profile_dir.glob(f"{workload}-*.raw"))


@dataclass(frozen=True)
class Row:
    workload: str
    metric: str
    unit: str
    better: str
    target: str
    config: str
    median: float | None
    runs: int
    note: str


def summarize(samples: list[Sample]) -> list[Row]:
    """One row per (metric, target, config): the median over the repeats that measured it."""
    grouped: dict[tuple[str, str, str], list[Sample]] = {}
    for s in samples:
        grouped.setdefault((s.figure.metric, s.target, s.figure.config), []).append(s)
    rows = []
    for (metric, target, config), group in grouped.items():
        values = [s.figure.value for s in group if s.figure.value is not None]
        first = group[0]
        note = next((s.figure.note for s in group if s.figure.value is None), "") if not values else first.figure.note
        rows.append(Row(first.workload, metric, first.figure.unit, first.figure.better, target, config,
                        median(values), len(values), note))
    return rows


@dataclass(frozen=True)
class Comparison:
    metric: str
    mine: Row | None       # kgc's row
    other: Row | None      # the other target's row for the same metric

    @property
    def ratio(self) -> float | None:
        if self.mine is None or self.other is None or self.mine.median is None or not self.other.median:
            return None
        return self.mine.median / self.other.median

    @property
    def better(self) -> str:
        """"lower" or "higher", as the rows (kgc's first) say."""
        row = self.mine or self.other
        if row is None:
            raise ValueError(f"a comparison of {self.metric} with no row on either side")
        return row.better

    @property
    def verdict(self) -> str:
        ratio = self.ratio
        if ratio is None:
            return "n/a"
        if ratio == 1:
            return "same"
        kgc_wins = ratio < 1 if self.better == "lower" else ratio > 1
        return "kgc better" if kgc_wins else "kgc worse"


def compare(rows: list[Row], mine: str, other: str) -> list[Comparison]:
    """Each of `mine`'s rows beside `other`'s row for the same metric (its first config),
    then `other`'s metrics that `mine` has no row for."""
    others: dict[str, Row] = {}
    for row in rows:
        if row.target == other:
            others.setdefault(row.metric, row)
    paired = [Comparison(row.metric, row, others.get(row.metric)) for row in rows if row.target == mine]
    seen = {c.metric for c in paired}
    return paired + [Comparison(m, None, row) for m, row in others.items() if m not in seen]


@contextlib.contextmanager
def scratch_dir(path: str | None):
    """The given work dir (kept), or a temporary one removed afterwards."""
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="kgc-bench-") as tmp:
        yield Path(tmp)
