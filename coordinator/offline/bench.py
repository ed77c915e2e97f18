"""Benchmark: audit + compaction of a generated data dir, plain Python vs Spark local mode.

    python -m coordinator.offline.bench --records 1000000 [--master 'local[*]'] [--work DIR]

Generates the data dir once (kept in --work for the next run), then times, for each
engine, the audit and the compaction of the same input; Spark's session start is timed
on its own. Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

from coordinator.offline.generate import GeneratorConfig, generate
from coordinator.offline.job import Options
from coordinator.offline.runner import audit, compact, local_map

NOW_MS = 1_790_000_000_000


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator.offline.bench")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--work", default="/tmp/kgc-offline-bench")
    parser.add_argument("--engines", default="python,spark")
    args = parser.parse_args(argv)

    work = Path(args.work)
    data = work / f"data-{args.records}"
    if not (data / "done.json").exists():
        shutil.rmtree(data, ignore_errors=True)
        started = time.perf_counter()
        manifest = generate(data, GeneratorConfig(records=args.records, groups=args.groups, now_ms=NOW_MS,
                                                  segment_bytes=100 * 2**20))
        (data / "done.json").write_text(json.dumps({"records": manifest.records,
                                                    "seconds": time.perf_counter() - started}))
    info = json.loads((data / "done.json").read_text())
    options = Options(now_ms=NOW_MS)
    rows = []
    for engine in args.engines.split(","):
        session_s = 0.0
        task_map = local_map
        spark = None
        if engine == "spark":
            from coordinator.offline import spark_engine

            started = time.perf_counter()
            spark = spark_engine.session(args.master)
            session_s = time.perf_counter() - started
            task_map = spark_engine.spark_map(spark)
        out = work / f"out-{engine}"
        shutil.rmtree(out, ignore_errors=True)
        try:
            audited = audit(data, out / "report", options, task_map)
            compacted = compact(data, out / "compacted", options, task_map)
        finally:
            if spark is not None:
                spark.stop()
        rows.append((engine, session_s, audited.seconds, compacted.seconds))
        print(f"{engine}: session {session_s:.1f} s, audit {audited.seconds:.1f} s, "
              f"compact {compacted.seconds:.1f} s ({audited.summary['findings_total']} findings, "
              f"{compacted.totals['records_after']:,} records kept)", flush=True)
    print()
    print(f"{info['records']:,} records, {_du(data) / 2**20:,.0f} MiB in {len(os.listdir(data)) - 1} partitions; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print()
    print("| engine | session start (s) | audit (s) | compaction (s) | audit + compaction (s) |")
    print("|---|---:|---:|---:|---:|")
    for engine, session_s, audit_s, compact_s in rows:
        name = engine if engine == "python" else f"spark {args.master}"
        print(f"| {name} | {session_s:.1f} | {audit_s:.1f} | {compact_s:.1f} | {audit_s + compact_s:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
