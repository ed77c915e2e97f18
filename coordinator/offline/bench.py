"""Benchmark: audit + compaction of a generated data dir, per engine and scanner.

    python -m coordinator.offline.bench --records 10000000 --groups 5000 [--master 'local[2]'] [--work DIR]

Generates the data dir once (kept in --work for the next run), then times, for each
engine (plain Python, Spark) and scanner (records: batch by batch; columns: numpy), the
audit and the compaction of the same input, in one run; Spark's session start is timed
on its own. Checks every run gave the same report and the same compacted bytes, and
prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from coordinator.arguments import finish_parsers, parse
from coordinator.offline.generate import GeneratorConfig, generate
from coordinator.offline.job import Options
from coordinator.offline.runner import TaskMap, audit, compact, local_map

NOW_MS = 1_790_000_000_000


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coordinator.offline.bench")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default="/tmp/kgc-offline-bench")
    parser.add_argument("--engines", default="spark", help="python, spark or both (comma-separated)")
    parser.add_argument("--scanners", default="records,columns",
                        help="records (batch by batch, the reference), columns (numpy), or both")
    return finish_parsers(parser)


def main(argv: list[str] | None = None) -> int:
    args = parse(build_parser(), argv)

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
    rows = []
    outputs = []
    for engine in args.engines.split(","):
        session_s = 0.0
        task_map: TaskMap = local_map
        spark = None
        if engine == "spark":
            from coordinator.offline import spark_engine

            started = time.perf_counter()
            spark = spark_engine.context(args.master)
            session_s = time.perf_counter() - started
            task_map = spark_engine.spark_map(spark)
        try:
            for scanner in args.scanners.split(","):
                options = Options(now_ms=NOW_MS, scanner=scanner)
                out = work / f"out-{engine}-{scanner}"
                shutil.rmtree(out, ignore_errors=True)
                audited = audit(data, out / "report", options, task_map)
                compacted = compact(data, out / "compacted", options, task_map)
                name = engine if engine == "python" else f"spark {args.master}"
                cpu = (sum(r.cpu_seconds for r in audited.results), sum(r.cpu_seconds for r in compacted.results))
                rows.append((f"{name}, {scanner}", session_s, audited.seconds, compacted.seconds, *cpu))
                outputs.append(out)
                print(f"{engine}/{scanner}: session {session_s:.1f} s, audit {audited.seconds:.1f} s, "
                      f"compact {compacted.seconds:.1f} s ({audited.summary['findings_total']} findings, "
                      f"{compacted.totals['records_after']:,} records kept)", flush=True)
        finally:
            if spark is not None:
                spark.stop()
    print()
    print(f"{info['records']:,} records, {_du(data) / 2**20:,.0f} MiB in {len(os.listdir(data)) - 1} partitions; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"same findings and summary, byte-identical compacted segments in every run: {_same(outputs)}")
    print()
    # Task CPU: the seconds of CPU the partition tasks used, summed; unlike the wall
    # times it does not grow when other work on the machine takes the cores.
    print("| engine, scanner | session start (s) | audit (s) | compaction (s) | audit + compaction (s) "
          "| audit task CPU (s) | compaction task CPU (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, session_s, audit_s, compact_s, audit_cpu, compact_cpu in rows:
        print(f"| {name} | {session_s:.1f} | {audit_s:.1f} | {compact_s:.1f} | {audit_s + compact_s:.1f} "
              f"| {audit_cpu:.1f} | {compact_cpu:.1f} |")
    if len(rows) > 1:
        first = rows[0]
        for name, _s, audit_s, compact_s, audit_cpu, compact_cpu in rows[1:]:
            print(f"\n{name} / {first[0]}: audit {audit_s / first[2]:.3f} (CPU {audit_cpu / first[4]:.3f}), "
                  f"compaction {compact_s / first[3]:.3f} (CPU {compact_cpu / first[5]:.3f})")
    return 0


def _same(outputs: list[Path]) -> bool:
    """Every run's report says the same and its compacted data dir holds the same bytes."""
    import pyarrow.parquet as pq

    first = outputs[0]
    summary = json.loads((first / "report" / "summary.json").read_text())
    for out in outputs[1:]:
        if json.loads((out / "report" / "summary.json").read_text()) != summary:
            return False
        for table in ("findings", "final_offsets", "groups"):
            if not pq.read_table(out / "report" / f"{table}.parquet").equals(
                    pq.read_table(first / "report" / f"{table}.parquet")):
                return False
        compared = subprocess.run(["diff", "-r", "-q", str(first / "compacted"), str(out / "compacted")],
                                  capture_output=True)
        if compared.returncode != 0:
            return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
