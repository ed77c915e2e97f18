"""`kgc audit`, `kgc compact` and `kgc generate`.

`add_subcommands(subparsers)` adds the three to a parser; each sets `handler`, called
with the parsed args, returning the exit code, and has its own `--log-level`. `main(argv)` is the same commands on
their own (what `python -m coordinator.offline` and spark-submit run, through `__main__.py`).

`--engine spark` (default) runs the per-partition tasks in Spark, on `--master`
(default `local[*]`, or the master spark-submit was given); `--engine python` runs the
same tasks one after another in this process, without pyspark.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import time
from importlib.util import find_spec
from pathlib import Path

from coordinator.arguments import finish_parsers, parse
from coordinator.group.config import GroupConfig
from coordinator.offline.findings import FindingType
from coordinator.offline.job import Options
from coordinator.offline.runner import TaskMap, local_map
from coordinator.settings import ServerConfig
from storage.clock import wall_clock_ms

log = logging.getLogger(__name__)

DELETE_RETENTION_MS = 24 * 3600 * 1000


def add_subcommands(subparsers) -> None:
    audit = subparsers.add_parser("audit", help="audit a data dir or a Kafka topic: findings, Parquet tables, report.html")
    audit.add_argument("data_dir", metavar="DATA_DIR", nargs="?", default=None,
                       help="the data dir (or a copy of it); a live one is fine. Or read a topic: --bootstrap")
    audit.add_argument("--bootstrap", default=None, metavar="HOST:PORT[,...]",
                       help="read the group state from a Kafka topic of this cluster instead of a data dir, "
                            "through Spark's Kafka source (read-only); its log offsets are checked as --upstream's")
    audit.add_argument("--topic", default="__consumer_offsets",
                       help="with --bootstrap: the topic (default %(default)s; kgc's state topic in HA mode)")
    audit.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                       help="a Kafka consumer setting of the cluster (security.protocol, ssl.truststore.location, "
                            "sasl.jaas.config ...), for --bootstrap's source and for --upstream's checks (TLS and "
                            "PLAIN/SCRAM logins: docs/audit.md); repeat for several")
    audit.add_argument("--spark-jars", default=None, metavar="JAR,...",
                       help="jars to add to the local Spark session: with --bootstrap, Spark's Kafka source "
                            "(spark-sql-kafka-0-10_2.13 at PySpark's version) and its dependencies")
    audit.add_argument("--since-report", default=None, metavar="PREVIOUS_OUT",
                       help="with --bootstrap: go on from this earlier report of the same topic: read from Kafka "
                            "only what was written since, and judge it with the records that report kept (the "
                            "findings of a full run); without it a run reads the whole topic. Every --bootstrap "
                            "report keeps its offsets and records (kafka/ in --out) for the next")
    audit.add_argument("--out", required=True, help="report directory to create")
    audit.add_argument("--upstream", default=None, metavar="HOST:PORT",
                       help="a broker of the Kafka cluster: check offsets against its logs and report lag")
    audit.add_argument("--offsets-retention-ms", type=int, default=GroupConfig().offsets_retention_ms,
                       help="offsets older than this are past retention, as kgc serve's setting (default %(default)s)")
    audit.add_argument("--since", type=_time_ms, default=None, metavar="TIME",
                       help="report only what records from this time on show (ISO 8601, UTC if no zone, or epoch ms)")
    audit.add_argument("--until", type=_time_ms, default=None, metavar="TIME",
                       help="audit the log as it was at this time: later records are not read (and it is the "
                            "audit's 'now' unless --now-ms is given)")
    audit.add_argument("--fail-on-findings", nargs="?", const="all", default=None, type=_finding_types,
                       metavar="TYPE,...",
                       help="exit 2 when findings of these types (default: of any type) are found; types: "
                            + ", ".join(t.value for t in FindingType))
    _engine_arguments(audit)
    audit.set_defaults(handler=run_audit)

    compact = subparsers.add_parser("compact", help="write a compacted copy of a data dir")
    compact.add_argument("data_dir", metavar="DATA_DIR", help="the data dir to compact (read, never changed)")
    compact.add_argument("--out", required=True, help="new data dir to create")
    compact.add_argument("--delete-retention-ms", type=int, default=DELETE_RETENTION_MS,
                         help="keep tombstones this long after their timestamp (default %(default)s)")
    compact.add_argument("--segment-bytes", type=int, default=ServerConfig().segment_bytes,
                         help="segment size of the copy (default %(default)s)")
    compact.add_argument("--verify", action="store_true",
                         help="replay input and output and check they load into the same state")
    _engine_arguments(compact)
    compact.set_defaults(handler=run_compact)

    generate = subparsers.add_parser("generate", help="write a synthetic data dir with injected anomalies")
    generate.add_argument("data_dir", metavar="DATA_DIR", help="the data dir to create")
    generate.add_argument("--records", type=int, default=100_000, help="records to write (default %(default)s)")
    generate.add_argument("--groups", type=int, default=200, help="groups to write them for (default %(default)s)")
    generate.add_argument("--per-type", type=int, default=2, help="injected anomalies of each kind (0: none)")
    generate.add_argument("--integrity", action="store_true", help="inject damaged batches too")
    generate.add_argument("--segment-bytes", type=int, default=ServerConfig().segment_bytes,
                          help="segment size (default %(default)s)")
    generate.add_argument("--seed", type=int, default=1, help="random seed: the same seed, the same data")
    generate.add_argument("--now-ms", type=int, default=None, help="time the data ends at (default: now)")
    generate.add_argument("--manifest", default=None, help="write the expected findings here (JSON)")
    generate.add_argument("--log-level", default="WARNING", help="log level: DEBUG, INFO, WARNING or ERROR (default %(default)s)")
    generate.set_defaults(handler=run_generate)


def _time_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither an ISO 8601 time nor epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _finding_types(text: str) -> frozenset[FindingType]:
    if text == "all":
        return frozenset(FindingType)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in FindingType._value2member_map_]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown finding type {', '.join(unknown) or repr(text)}; "
                                         f"known: {', '.join(t.value for t in FindingType)}")
    return frozenset(FindingType(name) for name in names)


def _engine_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=("spark", "python"), default="spark",
                   help="spark: one Spark task per partition (default); python: in this process")
    p.add_argument("--master", default=None, help="Spark master (default local[*], or spark-submit's)")
    p.add_argument("--now-ms", type=int, default=None, help="audit/compact as of this time (default: now)")
    p.add_argument("--log-level", default="WARNING", help="log level: DEBUG, INFO, WARNING or ERROR (default %(default)s)")


class _Engine:
    """The task map for the chosen engine, and the Spark context or session to stop
    afterwards: a session (SQL) only where Spark reads the input, a topic."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.spark = None
        self.context = None
        self.owned = False
        self.session_seconds = 0.0
        self.task_map: TaskMap = local_map
        if args.engine == "spark":
            from coordinator.offline import spark_engine

            started = time.perf_counter()
            # A session someone else started (a notebook, the tests) is theirs to stop.
            self.owned = spark_engine.active_session() is None
            jars = getattr(args, "spark_jars", None)
            if getattr(args, "bootstrap", None) is not None:
                self.spark = spark_engine.session(args.master, jars=jars, reads_in_jvm=True)
                self.context = self.spark.sparkContext
            else:
                self.context = spark_engine.context(args.master, jars=jars)
            self.session_seconds = time.perf_counter() - started
            self.task_map = spark_engine.spark_map(self.context)

    def close(self) -> None:
        running = self.spark or self.context
        if self.owned and running is not None:
            running.stop()


def _options(args) -> Options:
    until_ms = getattr(args, "until", None)
    now_ms = args.now_ms if args.now_ms is not None else until_ms if until_ms is not None else wall_clock_ms()
    return Options(
        now_ms=now_ms, since_ms=getattr(args, "since", None), until_ms=until_ms,
        offsets_retention_ms=getattr(args, "offsets_retention_ms", GroupConfig().offsets_retention_ms),
        delete_retention_ms=getattr(args, "delete_retention_ms", DELETE_RETENTION_MS),
        segment_bytes=getattr(args, "segment_bytes", ServerConfig().segment_bytes))


def setup_problem(args, needs: tuple[str, ...] = ()) -> str | None:
    """Why the command cannot run (a module of an extra missing, the data dir missing,
    --out not empty), as the one line to print; checked before any work."""
    missing = [m for m in (*needs, *(("pyspark",) if args.engine == "spark" else ())) if find_spec(m) is None]
    if missing:
        return (f"needs {', '.join(missing)} (the 'spark' extra): pip install 'kgc[spark]'"
                + (", or use --engine python" if missing == ["pyspark"] else ""))
    if getattr(args, "bootstrap", None) is not None:
        if args.data_dir is not None:
            return "give a data dir or --bootstrap, not both"
        if args.engine != "spark":
            return "--bootstrap reads the topic through Spark: use --engine spark"
    elif getattr(args, "since_report", None) is not None:
        return "--since-report goes on from an audit of a topic: give --bootstrap (a data dir is read whole)"
    elif args.data_dir is None or not Path(args.data_dir).is_dir():
        return f"no data dir at {args.data_dir}: give the directory kgc serve --data-dir wrote"
    bad = [o for o in getattr(args, "kafka_option", ()) if "=" not in o]
    if bad:
        return f"--kafka-option takes KEY=VALUE, got {', '.join(bad)}"
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return f"--out {args.out} exists and is not empty: choose another --out, or remove it"
    return None


def findings_by_kind(found: dict[str, int], upstream: bool) -> list[str]:
    """Integrity findings apart from hygiene ones, and what was not checked without --upstream."""
    from coordinator.offline.findings import UPSTREAM_TYPES
    from coordinator.offline.guide import INTEGRITY, UPSTREAM, kind_of

    lines = []
    integrity = {k: v for k, v in found.items() if kind_of(FindingType(k)) == INTEGRITY}
    if integrity:
        lines.append(f"integrity (damaged log files: act on these first): {json.dumps(integrity)}")
    if not upstream:
        lines.append("not checked (need --upstream HOST:PORT): " + ", ".join(sorted(t.value for t in UPSTREAM_TYPES)))
    elif not any(kind_of(FindingType(k)) == UPSTREAM for k in found):
        lines.append("upstream checks: nothing found")
    return lines


def run_audit(args) -> int:
    from coordinator.offline.runner import audit

    if problem := setup_problem(args, needs=("pyarrow", "numpy")):   # the report's tables and charts
        print(f"kgc audit: {problem}", file=sys.stderr)
        return 2
    log_offsets = topic_ids = None
    if args.bootstrap and not args.upstream:
        # The live checks come from the cluster the topic is read from.
        args.upstream = args.bootstrap.split(",")[0]
    from coordinator.offline.kafka_security import PLAINTEXT, UnsupportedSecurity, client_security

    security = PLAINTEXT
    if args.upstream:
        from coordinator.offline.upstream import UpstreamError, UpstreamOffsets

        try:
            # The cluster's TLS and SASL settings, as Spark's Kafka source gets them.
            security = client_security(dict(o.split("=", 1) for o in args.kafka_option))
        except UnsupportedSecurity as e:
            print(f"kgc audit: --kafka-option {e}", file=sys.stderr)
            return 2
        try:
            log_offsets, topic_ids = UpstreamOffsets(args.upstream, security=security).log_offsets_and_topic_ids()
        except UpstreamError as e:
            print(f"kgc audit: cannot read log offsets from --upstream {args.upstream}: {e}", file=sys.stderr)
            return 1
        print(f"upstream {args.upstream}: {len(log_offsets)} partitions", flush=True)
    plan = source = None
    if args.bootstrap:
        from coordinator.offline import incremental
        from coordinator.offline.kafka_source import TopicSource

        source = TopicSource(args.bootstrap, args.topic, dict(o.split("=", 1) for o in args.kafka_option))
        try:
            # Where the read ends (and, going on from a report, starts), before Spark starts.
            now = UpstreamOffsets(args.bootstrap.split(",")[0], security=security).topic_offsets(args.topic)
        except UpstreamError as e:
            print(f"kgc audit: cannot read the offsets of {args.topic} from --bootstrap {args.bootstrap}: {e}",
                  file=sys.stderr)
            return 1
        try:
            plan = incremental.plan(source, now, args.since_report)
        except incremental.Refused as e:
            print(f"kgc audit: {e}", file=sys.stderr)
            return 2
    engine = _Engine(args)
    try:
        if source is not None:
            from coordinator.offline.kafka_source import ConnectorMissing
            from coordinator.offline.runner import audit_topic

            try:
                run = audit_topic(engine.spark, source, args.out, _options(args), log_offsets, args.upstream, plan,
                                  topic_ids=topic_ids)
            except ConnectorMissing as e:
                print(f"kgc audit: {e}", file=sys.stderr)
                return 2
        else:
            run = audit(args.data_dir, args.out, _options(args), engine.task_map, log_offsets, args.upstream,
                        progress_label="audit", topic_ids=topic_ids)
    finally:
        engine.close()
    summary = run.summary
    found = {k: v for k, v in summary["findings"].items() if v}
    print(f"audited {summary['records']:,} records in {summary['partitions']} partitions "
          f"({args.engine}: session {engine.session_seconds:.1f} s, job {run.seconds:.1f} s)")
    if "kafka" in summary:
        kafka = summary["kafka"]
        print(f"read {kafka['records_read']:,} records from {args.topic}"
              + (f", {kafka['records_previous']:,} kept by --since-report {args.since_report}"
                 if args.since_report else " (all of it)")
              + f"; kept for the next run (--since-report {args.out})")
    for warning in summary["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"findings: {json.dumps(found) if found else 'none'}")
    for line in findings_by_kind(found, bool(args.upstream)):
        print(line)
    print(f"report: {Path(args.out) / 'report.html'}")
    failing = sorted(k for k in found if args.fail_on_findings and FindingType(k) in args.fail_on_findings)
    if failing:
        print(f"failing: {', '.join(failing)} found", file=sys.stderr)
        return 2
    return 0


def run_compact(args) -> int:
    from coordinator.offline.compact import CompactionRefused
    from coordinator.offline.runner import compact

    if problem := setup_problem(args):
        print(f"kgc compact: {problem}", file=sys.stderr)
        return 2
    engine = _Engine(args)
    try:
        run = compact(args.data_dir, args.out, _options(args), engine.task_map, progress_label="compact")
    except CompactionRefused as e:
        print(f"compaction refused: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        # Spark wraps a task's exception; its message still names the damage.
        if "CompactionRefused" not in str(e):
            raise
        print(f"compaction refused: {str(e).splitlines()[-1]}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    t = run.totals
    print(f"compacted {t['records_before']:,} records to {t['records_after']:,} "
          f"({t['bytes_before']:,} to {t['bytes_after']:,} bytes, {t['segments_written']} segments) "
          f"({args.engine}: session {engine.session_seconds:.1f} s, job {run.seconds:.1f} s)")
    if args.verify:
        from coordinator.offline.state import replay_state

        before, after = replay_state(args.data_dir), replay_state(args.out)
        if (before.offsets, before.groups, before.next_offsets) != (after.offsets, after.groups, after.next_offsets):
            print("verify: the compacted data dir does NOT load into the same state", file=sys.stderr)
            return 1
        print(f"verify: same state ({len(after.offsets):,} offsets, {len(after.groups):,} groups)")
    return 0


def run_generate(args) -> int:
    from coordinator.offline.generate import GeneratorConfig, generate

    config = GeneratorConfig(records=args.records, groups=args.groups, per_type=args.per_type,
                             integrity=args.integrity, segment_bytes=args.segment_bytes, seed=args.seed,
                             now_ms=args.now_ms if args.now_ms is not None else wall_clock_ms())
    started = time.perf_counter()
    manifest = generate(args.data_dir, config)
    print(f"wrote {manifest.records:,} records to {args.data_dir} in {time.perf_counter() - started:.1f} s "
          f"(now_ms {config.now_ms}); {len(manifest.expected)} findings injected")
    if args.manifest:
        Path(args.manifest).write_text(manifest.to_json())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgc-offline", description="kgc offline audit and compaction")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    return finish_parsers(parser)


def main(argv: list[str] | None = None) -> int:
    args = parse(build_parser(), argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
