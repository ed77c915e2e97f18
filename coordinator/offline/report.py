"""The audit report: `summary.json`, Parquet tables (see `tables`) and `report.html`.

The HTML page is self-contained (inline SVG, no script, no fonts or files from
elsewhere: it is opened on machines without internet) and shows, in charts:
a timeline per group (commits, rebalances, findings), commits over time for the busiest
groups, lag per group (with an upstream cluster),
and findings by type, integrity (damaged files) apart from hygiene (stale or left-behind
offsets) and from the checks against the upstream; what each type means and what to do
about it (`guide`); then tables of findings per group and the findings themselves.
Durations and sizes are shown in human units.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from coordinator.offline.findings import Finding, FindingType
from coordinator.offline.guide import (
    GUIDES,
    KIND_TITLES,
    UPSTREAM,
    human_bytes,
    human_detail,
    human_duration,
    kind_of,
)
from coordinator.offline.job import Options, PartitionResult
from coordinator.offline.tables import (
    FINAL_OFFSETS,
    FINDINGS,
    GROUP_HISTORY,
    GROUPS,
    CommitTimes,
    commit_times,
    write_rows,
)
from coordinator.offline.timeline import timelines

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")
FINDINGS_COLOR = "#d62728"
LAG_COLOR = "#3b6fb6"
TOP_GROUPS = 8
TIME_BUCKETS = 48
MAX_TABLE_ROWS = 200


def write_report(report_dir: Path, results: Sequence[PartitionResult], *, data_dir: str, options: Options,
                 upstream: str | None, kafka: dict | None = None, warnings: Sequence[str] = ()) -> dict:
    """The report of `results`. A topic's audit adds what it read of the topic (`kafka`:
    `incremental.kafka_summary`); `warnings` are about the audit's input (records deleted
    before any run read them), shown first and kept in summary.json."""
    # In one order whatever the scanner found them in, so reports of one log are the same.
    findings = sorted((f for r in results for f in r.findings), key=_finding_key)
    final_offsets = sorted((row for r in results for row in r.final_offsets),
                           key=lambda row: (row["log_partition"], row["group"], row["topic"], row["partition"]))
    groups = [row for r in results for row in r.groups]
    write_rows(report_dir / "findings.parquet", FINDINGS, [f.as_row() for f in findings])
    write_rows(report_dir / "final_offsets.parquet", FINAL_OFFSETS, final_offsets)
    write_rows(report_dir / "groups.parquet", GROUPS, groups)
    rebalances = [row for r in results for row in r.rebalances]
    write_rows(report_dir / "group_history.parquet", GROUP_HISTORY, rebalances)
    summary = _summary(results, findings, final_offsets, groups, data_dir, options, upstream)
    summary["warnings"] = list(warnings)
    if kafka is not None:
        summary["kafka"] = kafka
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (report_dir / "report.html").write_text(_html(report_dir, results, summary, findings, final_offsets,
                                                  rebalances, upstream))
    return summary


def _summary(results, findings: list[Finding], final_offsets: list[dict], groups: list[dict], data_dir: str,
             options: Options, upstream: str | None) -> dict:
    per_type = Counter(f.type.value for f in findings)
    per_group: dict[str, Counter] = defaultdict(Counter)
    per_partition: dict[int, Counter] = defaultdict(Counter)
    for f in findings:
        if f.group is not None:
            per_group[f.group][f.type.value] += 1
        else:
            per_partition[f.log_partition][f.type.value] += 1
    return {
        "data_dir": data_dir,
        "now_ms": options.now_ms,
        "offsets_retention_ms": options.offsets_retention_ms,
        "upstream": upstream,
        "partitions": len(results),
        "records": sum(r.records for r in results),
        "commits": sum(r.commits for r in results),
        "skipped_records": sum(r.skipped_records for r in results),
        "bytes_read": sum(r.bytes_read for r in results),
        "tail_bytes": sum(r.tail_bytes for r in results),
        "groups": len(groups),
        "offsets": len(final_offsets),
        "findings_total": len(findings),
        "findings": {t.value: per_type.get(t.value, 0) for t in FindingType},
        "findings_per_group": {g: dict(c) for g, c in sorted(per_group.items())},
        "findings_per_partition": {str(p): dict(c) for p, c in sorted(per_partition.items())},
        "compaction": [asdict(r.compaction) for r in results if r.compaction is not None] or None,
    }


# ---------------------------------------------------------------------- HTML


def _html(report_dir: Path, results: Sequence[PartitionResult], summary: dict, findings: list[Finding],
          final_offsets: list[dict], rebalances: list[dict], upstream: str | None) -> str:
    e = html.escape
    history = commit_times(report_dir, [(r.partition, r.commits_per_group) for r in results])
    group_timelines = timelines(history, rebalances, findings)
    commits_chart = _commits_chart(history)
    lag_chart = _lag_chart(final_offsets) if upstream else \
        '<p class="note">No upstream cluster given (<code>--upstream</code>): lag is unknown.</p>'
    findings_charts = "".join(_kind_chart(kind, summary["findings"], upstream) for kind in KIND_TITLES)
    per_group = sorted(summary["findings_per_group"].items(), key=lambda kv: -sum(kv[1].values()))
    group_rows = "".join(
        f"<tr><td>{e(g)}</td><td>{sum(c.values())}</td><td>{e(', '.join(f'{k} {v}' for k, v in sorted(c.items())))}"
        f"</td></tr>" for g, c in per_group[:MAX_TABLE_ROWS])
    finding_rows = "".join(_finding_row(f) for f in sorted(findings, key=_finding_order)[:MAX_TABLE_ROWS])
    stats = "".join(f"<div class='stat'><b>{summary[k]:,}</b><span>{label}</span></div>" for k, label in (
        ("records", "records"), ("commits", "commits"), ("groups", "groups"), ("offsets", "committed offsets"),
        ("findings_total", "findings"), ("partitions", "partitions")))
    stats += f"<div class='stat'><b>{human_bytes(summary['bytes_read'])}</b><span>read</span></div>"
    now = _utc(summary["now_ms"])
    read = _kafka_read(summary.get("kafka"))
    warnings = "".join(f"<li>{e(w)}</li>" for w in summary["warnings"])
    if warnings:
        warnings = f'<section id="warnings" class="warn"><h2>Warnings</h2><ul>{warnings}</ul></section>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kgc offset audit</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1100px; }}
h1 {{ margin-bottom: 4px; }} .sub {{ color: #666; margin-top: 0; }}
.stats {{ display: flex; gap: 16px; flex-wrap: wrap; margin: 16px 0; }}
.stat {{ background: #f4f6f8; border-radius: 6px; padding: 10px 16px; min-width: 110px; }}
.stat b {{ display: block; font-size: 22px; }} .stat span {{ color: #666; font-size: 13px; }}
section {{ margin: 28px 0; }} .note {{ color: #666; }}
table {{ border-collapse: collapse; font-size: 13px; width: 100%; }}
td, th {{ border-bottom: 1px solid #e3e3e3; padding: 4px 6px; text-align: left; vertical-align: top; }}
th {{ background: #f4f6f8; }} svg text {{ font-size: 11px; fill: #333; }}
.warn {{ background: #fff4e5; border-left: 4px solid #e08a00; padding: 4px 16px; }}
.wide {{ overflow-x: auto; }} td {{ overflow-wrap: break-word; }} td.nw {{ white-space: nowrap; }} h3 {{ margin-bottom: 4px; }}
</style></head><body>
<h1>Offset audit</h1>
<p class="sub">{e(summary["data_dir"])} at {now}; retention {human_duration(summary["offsets_retention_ms"])};
upstream {e(upstream or "none")}</p>{read}
{warnings}<div class="stats">{stats}</div>
<section id="findings-by-type"><h2>Findings by type</h2>{findings_charts}</section>
<section id="what-to-do"><h2>What each finding means and what to do</h2>
<div class="wide"><table><tr><th>type</th><th>kind</th><th>found</th><th>means</th><th>what to do</th></tr>
{_guide_rows(summary["findings"], upstream)}</table></div></section>
<section id="group-timelines"><h2>Group timelines</h2>
<p class="note">Commits (bars), rebalances (orange: generation and members), deletion (dark line) and
findings (red; hover for details) per group, each over its own span of time.</p>{group_timelines}</section>
<section id="commits-over-time"><h2>Commits over time (busiest groups)</h2>{commits_chart}</section>
<section id="lag-per-group"><h2>Lag per group</h2>{lag_chart}</section>
<section id="findings-per-group"><h2>Findings per group</h2>
<div class="wide"><table><tr><th>group</th><th>findings</th><th>by type</th></tr>{group_rows}</table></div></section>
<section id="findings"><h2>Findings{f" (first {MAX_TABLE_ROWS} of {len(findings)})" if len(findings) > MAX_TABLE_ROWS else ""}</h2>
<div class="wide"><table><tr><th>type</th><th>group</th><th>topic-partition</th><th>offset</th><th>record</th>
<th>time</th><th>member / generation / client</th><th>detail</th></tr>{finding_rows}</table></div></section>
</body></html>
"""


def _kafka_read(kafka: dict | None) -> str:
    """What a topic's audit read from Kafka, and from the report it went on from."""
    if kafka is None:
        return ""
    e = html.escape
    text = f"Read {kafka['records_read']:,} records from Kafka"
    if kafka["since_report"]:
        text += (f" (written since the previous report), audited after the {kafka['records_previous']:,} "
                 f"that report kept: {e(kafka['since_report'])}")
    else:
        text += " (the whole topic)"
    return f'<p class="sub">{text}.</p>'


def _kind_chart(kind: str, counts: dict[str, int], upstream: str | None) -> str:
    title = f"<h3>{html.escape(KIND_TITLES[kind])}</h3>"
    if kind == UPSTREAM and not upstream:
        return title + ('<p class="note">Not checked: these need <code>kgc audit --upstream HOST:PORT</code> '
                        "(offsets below the log start or above the log end).</p>")
    items = [(t, n) for t, n in counts.items() if kind_of(FindingType(t)) == kind]
    if not any(n for _, n in items):
        return title + '<p class="note">None found.</p>'
    return title + _bar_chart(items, FINDINGS_COLOR, "findings")


def _guide_rows(counts: dict[str, int], upstream: str | None) -> str:
    e = html.escape
    rows = []
    for kind in KIND_TITLES:
        for t, guide in GUIDES.items():
            if kind_of(t) != kind:
                continue
            found = "needs --upstream" if kind == UPSTREAM and not upstream else f"{counts.get(t.value, 0):,}"
            rows.append(f"<tr><td>{e(t.value)}</td><td>{kind}</td><td>{found}</td><td>{e(guide.meaning)}</td>"
                        f"<td>{e(guide.action)}</td></tr>")
    return "".join(rows)


def _finding_key(f: Finding) -> tuple:
    return (f.log_partition, f.record_offset if f.record_offset is not None else -1, f.type.value,
            f.group or "", f.topic or "", f.partition or 0, f.segment or "", f.position or 0)


def _finding_order(f: Finding) -> tuple:
    # Integrity findings first (act on those), then hygiene, then the upstream's.
    return (list(KIND_TITLES).index(kind_of(f.type)), f.type.value, f.group or "", f.topic or "", f.partition or 0, f.record_offset or 0)


def _finding_row(f: Finding) -> str:
    e = html.escape
    tp = f"{f.topic}-{f.partition}" if f.topic is not None else ""
    record = f"p{f.log_partition} @{f.record_offset}" if f.record_offset is not None else f"p{f.log_partition}"
    if f.segment:
        record += f" {f.segment}:{f.position}"
    who = " / ".join(str(x) for x in (f.member_id, f.generation, f.client_id) if x not in (None, ""))
    when = _utc(f.timestamp_ms) if f.timestamp_ms is not None else ""
    offset = "" if f.committed_offset is None else str(f.committed_offset)
    return (f"<tr><td>{e(f.type.value)}</td><td>{e(f.group or '')}</td><td>{e(tp)}</td><td>{offset}</td>"
            f"<td>{e(record)}</td><td class=\"nw\">{when}</td><td>{e(who)}</td><td>{e(human_detail(f.detail))}</td></tr>")


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _commits_chart(history: CommitTimes) -> str:
    if not history.busiest:
        return '<p class="note">No commits.</p>'
    top = history.busiest[:TOP_GROUPS]
    times = history.times_of(top)
    ts = np.concatenate(times)
    # A few very old commits would squeeze everything else into the last buckets: they
    # are counted in the first one instead.
    lo, hi = int(np.quantile(ts, 0.01)), int(ts.max()) + 1
    edges = np.linspace(lo, hi, TIME_BUCKETS + 1)
    series = []
    for group, stamps in zip(top, times, strict=True):
        hist, _ = np.histogram(np.maximum(stamps, lo), bins=edges)
        series.append((group, hist.tolist()))
    return _line_chart(series, lo, hi)


def _line_chart(series: list[tuple[str, list[int]]], lo_ms: int, hi_ms: int) -> str:
    width, height, left, bottom, top, right = 900, 300, 50, 30, 10, 190
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(max(values) for _, values in series) or 1
    buckets = len(series[0][1])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="commits over time">',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>',
             f'<text x="{left - 6}" y="{top + 8}" text-anchor="end">{peak}</text>',
             f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>']
    for i in range(5):
        x = left + plot_w * i / 4
        label = _utc(lo_ms + (hi_ms - lo_ms) * i // 4)[5:16]
        parts.append(f'<text x="{x:.0f}" y="{height - 10}" text-anchor="middle">{label}</text>')
    for index, (group, values) in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        points = " ".join(f"{left + plot_w * (i + 0.5) / buckets:.1f},{top + plot_h - plot_h * v / peak:.1f}"
                          for i, v in enumerate(values))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2.5" points="{points}">'
                     f'<title>{html.escape(group)}: {sum(values)} commits</title></polyline>')
        y = top + 14 + index * 18
        parts.append(f'<rect x="{left + plot_w + 12}" y="{y - 9}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{left + plot_w + 30}" y="{y + 1}">{html.escape(_short(group))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _lag_chart(final_offsets: list[dict]) -> str:
    lag: Counter = Counter()
    for row in final_offsets:
        if row["lag"] is not None:
            lag[row["group"]] += row["lag"]
    if not lag:
        return '<p class="note">No committed offset matched a partition of the upstream cluster.</p>'
    return _bar_chart(lag.most_common(20), LAG_COLOR, "lag (records)")


def _bar_chart(items: list[tuple[str, int]], color: str, what: str) -> str:
    width, label_w, bar_h, gap = 900, 240, 18, 6
    plot_w = width - label_w - 80
    peak = max((v for _, v in items), default=0) or 1
    height = len(items) * (bar_h + gap) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{html.escape(what)}">']
    for i, (label, value) in enumerate(items):
        y = 5 + i * (bar_h + gap)
        w = max(plot_w * value / peak, 0)
        parts.append(f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{html.escape(_short(label, 34))}</text>'
                     f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                     f'<title>{html.escape(label)}: {value:,} {html.escape(what)}</title></rect>'
                     f'<text x="{label_w + w + 6:.1f}" y="{y + 13}">{value:,}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
