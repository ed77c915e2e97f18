"""Rendering a comparison: the machine it ran on, and one Markdown table of medians.

Each kgc figure is also checked against the issue's target for it (issue 6), where
there is one, so the table says plainly which targets are met.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from coordinator.bench.compare import Comparison, Row

# (does this row carry the figure?, "<=" or ">=", threshold): issue 6's "Targets"
ISSUE_TARGETS: list[tuple[Callable[[Row], bool], str, float]] = [
    (lambda r: r.metric == "join 1: FindCoordinator to all synced", "<=", 5.0),
    (lambda r: r.metric == "join 200: last JoinGroup to all synced", "<=", 100.0),
    (lambda r: r.metric == "rebalance 50: last JoinGroup to all others synced", "<=", 50.0),
    (lambda r: r.metric.startswith("heartbeat") and r.metric.endswith("heartbeats/s"), ">=", 30_000),
    (lambda r: r.metric.startswith("heartbeat") and r.metric.endswith(": p99"), "<=", 5.0),
    (lambda r: r.metric.startswith("commit") and r.metric.endswith("partition-commits/s")
     and "fsync=always" in r.config, ">=", 100_000),
    (lambda r: r.metric.startswith("commit") and r.metric.endswith(": p99") and "fsync=always" in r.config,
     "<=", 10.0),
    (lambda r: r.metric.endswith("replay rate"), ">=", 500_000),
    (lambda r: r.metric.startswith("memory: RSS per committed offset"), "<=", 300),
    (lambda r: r.metric == "memory: RSS per member, connection excluded", "<=", 5_000),
]


def issue_target(row: Row | None) -> str:
    if row is None:
        return ""
    for applies, op, threshold in ISSUE_TARGETS:
        if applies(row):
            if row.median is None:
                return f"{op} {_number(threshold)}"
            met = row.median <= threshold if op == "<=" else row.median >= threshold
            return f"{op} {_number(threshold)}: {'met' if met else 'NOT met'}"
    return ""


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _cell(row: Row | None) -> str:
    if row is None:
        return "—"
    if row.median is None:
        return "n/a (see notes)" if row.note else "n/a"
    return f"{_number(row.median)} {row.unit}"


def table(comparisons: list[Comparison], mine: str, other_label: str) -> str:
    """The comparison as a Markdown table; a column of `mine`'s configs only when a row has one
    (workloads run at their defaults have none, and an empty column is only noise)."""
    configs = [c.mine.config if c.mine else "" for c in comparisons]
    config_head, config_rule = (f" {mine} config |", "---|") if any(configs) else ("", "")
    lines = [
        f"| figure |{config_head} {mine} (median) | {other_label} (median) | {mine}/{other_label} | verdict "
        "| issue target |",
        f"|---|{config_rule}---|---|---|---|---|",
    ]
    for c, config in zip(comparisons, configs, strict=True):
        config_cell = f" {config} |" if config_head else ""
        ratio = f"{c.ratio:.3g}" if c.ratio is not None else "n/a"
        lines.append(f"| {c.metric} ({c.better} is better) |{config_cell} {_cell(c.mine)} | {_cell(c.other)} "
                     f"| {ratio} | {c.verdict} | {issue_target(c.mine)} |")
    return "\n".join(lines)


def configs(comparisons: list[Comparison]) -> str:
    """The other target's configuration(s), said once under the table."""
    seen = dict.fromkeys(c.other.config for c in comparisons if c.other and c.other.config)
    return "\n".join(f"- other target: {config}" for config in seen)


def notes(rows: list[Row]) -> str:
    """Each distinct note once, under the config's first clause (which names the setup)
    and the figure family (the metric up to its colon, unless that is just the workload)."""
    def family(row: Row) -> str:
        prefix = row.metric.split(":")[0]
        return row.metric if prefix == row.workload else prefix

    lines = dict.fromkeys(f"- {r.config.split(',')[0] or r.target} · {family(r)}: {r.note}" for r in rows if r.note)
    return "\n".join(lines)


def _git_commit() -> str:
    repo = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def _memory_total() -> str:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            kb = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1])
    except (OSError, StopIteration):
        return "unknown"
    return f"{kb / 2**20:.1f} GiB"


def machine(work_dir: Path) -> str:
    disk = shutil.disk_usage(work_dir)
    try:
        df = subprocess.run(["df", "-h", str(work_dir)], capture_output=True, text=True, timeout=10).stdout.strip()
        device = df.splitlines()[-1].split()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        device = "unknown"
    return "\n".join([
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- cores (nproc): {len(os.sched_getaffinity(0))}; memory: {_memory_total()}",
        f"- disk of the work dir: {device}, {disk.total / 2**30:.0f} GiB, {disk.free / 2**30:.0f} GiB free",
        f"- kernel: {platform.release()}; Python {platform.python_version()}",
        f"- kgc commit: {_git_commit()}",
    ])
