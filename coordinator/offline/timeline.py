"""Per-group timelines for report.html: what happened to a group, on one time axis.

Each group gets a strip (inline SVG, no script): its commits over time as a density of
bars, each rebalance (a GroupMetadata record: a new generation) as a vertical line
labelled with the generation and member count, the group's deletion as a dark line, and
each finding about the group as a red marker at the time of the record that shows it
(hover for what it is). Groups with findings come first, most findings first, then the
busiest groups. Each strip spans its own group's first to last event, so a group active
for an hour is as readable as one active for weeks; the span is written on the strip.
"""

from __future__ import annotations

import datetime as dt
import html
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from coordinator.offline.findings import Finding
from coordinator.offline.tables import CommitTimes

COMMITS_COLOR = "#8fb3d9"
REBALANCE_COLOR = "#e6550d"
DELETED_COLOR = "#333333"
FINDING_COLOR = "#b2182b"
MAX_GROUPS = 12
BUCKETS = 150
WIDTH, LEFT, RIGHT, HEIGHT = 1000, 10, 10, 92
PLOT_TOP, PLOT_BOTTOM = 22, 70            # commit bars between these; findings below


def timelines(history: CommitTimes, rebalances: Sequence[dict], findings: Sequence[Finding],
              max_groups: int = MAX_GROUPS) -> str:
    """The timelines section's body: one SVG per chosen group."""
    per_group: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.group is not None:
            per_group[f.group].append(f)
    chosen = sorted(per_group, key=lambda g: (-len(per_group[g]), g))[:max_groups]
    chosen += [g for g in history.busiest if g not in per_group][:max_groups - len(chosen)]
    if not chosen:
        return '<p class="note">No groups.</p>'
    changes: dict[str, list[dict]] = defaultdict(list)
    for r in rebalances:
        if r["group"] in chosen:
            changes[r["group"]].append(r)
    stamps = history.times_of(chosen)
    return "".join(_strip(g, times, changes[g], per_group[g]) for g, times in zip(chosen, stamps, strict=True))


def _x(ms: int, lo: int, hi: int) -> float:
    return LEFT + (WIDTH - LEFT - RIGHT) * (ms - lo) / (hi - lo)


def _strip(group: str, stamps: np.ndarray, changes: list[dict], findings: list[Finding]) -> str:
    e = html.escape
    every = [*stamps.tolist(), *(c["timestamp_ms"] for c in changes),
             *(f.timestamp_ms for f in findings if f.timestamp_ms is not None)]
    lo, hi = min(every, default=0), max(every, default=0)
    # A little room either side, so an event at an end is not drawn on the edge.
    pad = max((hi - lo) // 50, 1000)
    lo, hi = lo - pad, hi + pad
    counts, _edges = np.histogram(stamps, bins=BUCKETS, range=(lo, hi + 1))
    peak = max(int(counts.max(initial=0)), 1)
    bar_w = (WIDTH - LEFT - RIGHT) / BUCKETS
    kinds = Counter(f.type.value for f in findings)
    summary = f"{len(stamps):,} commits, {sum(1 for c in changes if c['generation'] is not None)} rebalances"
    if kinds:
        summary += ", findings: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" height="{HEIGHT}" '
             f'role="img" aria-label="timeline of {e(group)}" shape-rendering="crispEdges" '
             f'style="display:block;margin:4px 0 12px">',
             f'<text x="{LEFT}" y="13"><tspan font-weight="bold">{e(group)}</tspan> — {e(summary)}</text>',
             f'<text x="{WIDTH - RIGHT}" y="13" text-anchor="end" font-size="9">{_utc(lo)} → {_utc(hi)}</text>',
             f'<line x1="{LEFT}" y1="{PLOT_BOTTOM}" x2="{WIDTH - RIGHT}" y2="{PLOT_BOTTOM}" stroke="#999"/>']
    for i, n in enumerate(counts.tolist()):
        if n:
            h = (PLOT_BOTTOM - PLOT_TOP) * n / peak
            parts.append(f'<rect x="{LEFT + i * bar_w:.1f}" y="{PLOT_BOTTOM - h:.1f}" width="{max(bar_w - 0.5, 0.5):.1f}" '
                         f'height="{h:.1f}" fill="{COMMITS_COLOR}"><title>{n} commits</title></rect>')
    labelled_to = -1.0
    for c in changes:
        x = _x(c["timestamp_ms"], lo, hi)
        when = _utc(c["timestamp_ms"])
        if c["generation"] is None:
            parts.append(f'<line x1="{x:.1f}" y1="{PLOT_TOP - 4}" x2="{x:.1f}" y2="{PLOT_BOTTOM}" stroke="{DELETED_COLOR}" '
                         f'stroke-width="2.5"><title>group deleted at {when} (offset {c["record_offset"]})'
                         f'</title></line>')
            continue
        label = f'generation {c["generation"]}, {c["members"]} members, at {when} (offset {c["record_offset"]})'
        parts.append(f'<line x1="{x:.1f}" y1="{PLOT_TOP - 4}" x2="{x:.1f}" y2="{PLOT_BOTTOM}" stroke="{REBALANCE_COLOR}" '
                     f'stroke-width="2"><title>{e(label)}</title></line>')
        if x >= labelled_to:           # labels of close rebalances would overlap: the first one speaks
            parts.append(f'<text x="{x + 2:.1f}" y="{PLOT_TOP + 6}" font-size="9">g{c["generation"]}</text>')
            labelled_to = x + 26
    for f in findings:
        if f.timestamp_ms is None:
            continue
        x = _x(f.timestamp_ms, lo, hi)
        y = PLOT_BOTTOM + 12
        where = f"{f.topic}-{f.partition}" if f.topic is not None else ""
        label = f"{f.type.value} {where} offset {f.committed_offset} at {_utc(f.timestamp_ms)}: {f.detail}"
        parts.append(f'<path d="M{x:.1f},{y - 7} l6,7 l-6,7 l-6,-7 z" fill="{FINDING_COLOR}">'
                     f'<title>{e(label)}</title></path>')
    parts.append("</svg>")
    return "".join(parts)


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
