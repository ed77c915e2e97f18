"""`kgc bench`: run the workloads against one target, or compare kgc with another.

    kgc bench run --target kgc|kgc-tls|tansu|HOST:PORT [--pid PID] [--workloads join,commit] [sizes]
    kgc bench compare [--kgc kgc|kgc-tls|HOST:PORT] [--other tansu|kgc|HOST:PORT] [--repeats 3] [sizes]

A running target is HOST:PORT, or NAME=HOST:PORT to name it in the report
(`--other kafka=127.0.0.1:9092`); `python -m tests.bench.against_kafka` starts Apache Kafka
and kgc in front of it from the cached jars and compares them this way.
    kgc bench protocols [--members 50] ...   (KIP-848 vs classic on kgc, `bench.protocols`)

`kgc-tls` is kgc with TLS on its listener (a throwaway self-signed ECDSA certificate): with
`--kgc kgc-tls --other kgc` the report is the cost of TLS.

Every field of `context.Sizes` is a flag (`--join-members 1,10,50,200`,
`--duration-s 5`, ...); `--tiny` starts from the smoke-test sizes instead.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from coordinator.bench import compare as driver
from coordinator.bench import profile, protocols, report
from coordinator.bench.context import Sizes


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part.replace("_", "")) for part in text.split(",") if part)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _workloads(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in driver.WORKLOADS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown workloads {unknown}; known: {', '.join(driver.WORKLOADS)}")
    return names


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workloads", type=_workloads, default=list(driver.WORKLOADS),
                   help=f"comma-separated, from: {', '.join(driver.WORKLOADS)} (default: all)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each workload per target (default %(default)s)")
    p.add_argument("--tiny", action="store_true", help="start from the smoke-test sizes")
    p.add_argument("--work-dir", default=None, help="keep logs and data dirs here (default: a temp dir, removed)")
    p.add_argument("--datadir-cache", default=None, help="reuse generated load data dirs from here")
    p.add_argument("--profile", dest="profile_dir", default=None,
                   help="sample every kgc started here with py-spy; raw stacks and hot spots go here")
    p.add_argument("--json", dest="json_path", default=None, help="write every sample here")
    p.add_argument("--markdown", dest="markdown_path", default=None, help="write the report here too")
    p.add_argument("--log-level", default="WARNING", help="log level: DEBUG, INFO, WARNING or ERROR (default %(default)s)")
    sizes = p.add_argument_group("sizes")
    for f in dataclasses.fields(Sizes):
        kind = type(f.default)
        parse = _int_tuple if kind is tuple else kind
        sizes.add_argument(f"--{f.name.replace('_', '-')}", dest=f"size_{f.name}", type=parse, default=None,
                           help=f"(default {f.default})")


def add_bench_parser(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="load generator: kgc vs another coordinator")
    sub = bench.add_subparsers(dest="bench_command", required=True)
    run = sub.add_parser("run", help="run workloads against one target")
    run.add_argument("--target", default="kgc",
                     help="kgc, kgc-tls (kgc with TLS), tansu (started here) or HOST:PORT (default kgc)")
    run.add_argument("--pid", type=int, default=None,
                     help="pid of a HOST:PORT target, for the memory workload and the CPU per request")
    _add_common(run)
    run.set_defaults(repeats=1)
    cmp = sub.add_parser("compare", help="run every workload against kgc and another target, in turn")
    cmp.add_argument("--kgc", default="kgc", help="kgc, kgc-tls (started here) or [NAME=]HOST:PORT (default kgc)")
    cmp.add_argument("--kgc-pid", type=int, default=None,
                     help="pid of a HOST:PORT kgc, for the memory workload and the CPU per request")
    cmp.add_argument("--other", default="tansu", help="tansu, kgc (started here) or [NAME=]HOST:PORT (default tansu)")
    cmp.add_argument("--other-pid", type=int, default=None,
                     help="pid of a HOST:PORT other target, for the memory workload and the CPU per request")
    _add_common(cmp)
    protocols.add_protocols_parser(sub)
    bench.set_defaults(handler=run_bench, prog_name="kgc bench")


def sizes_from(args) -> Sizes:
    base = Sizes.tiny() if args.tiny else Sizes()
    chosen = {f.name: getattr(args, f"size_{f.name}") for f in dataclasses.fields(Sizes)
              if getattr(args, f"size_{f.name}") is not None}
    return dataclasses.replace(base, **chosen)


def run_bench(args) -> int:
    """The `kgc bench` handler; returns the exit status."""
    if args.bench_command == "protocols":
        return protocols.run_protocols(args)
    profile_dir = Path(args.profile_dir) if args.profile_dir else None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    if args.bench_command == "run":
        targets = [driver.choose_target(args.target, args.pid, profile_dir)]
    else:
        targets = [driver.choose_target(args.kgc, args.kgc_pid, profile_dir),
                   driver.choose_target(args.other, args.other_pid)]
    sizes = sizes_from(args)
    argv = sys.argv[1:]
    rest = argv[argv.index(args.bench_command) + 1:] if args.bench_command in argv else []
    command = " ".join([args.prog_name, args.bench_command, *rest])
    with driver.scratch_dir(args.work_dir) as work_dir:
        cache = Path(args.datadir_cache) if args.datadir_cache else None
        samples = _run(driver.run_all(targets, args.workloads, sizes, args.repeats, work_dir, cache, profile_dir))
        machine = report.machine(work_dir)
    rows = driver.summarize(samples)
    other = targets[1].label if len(targets) > 1 else ""
    comparisons = driver.compare(rows, targets[0].label, other)
    text = "\n\n".join(part for part in (
        f"Command: `{command}`",
        machine,
        report.table(comparisons, targets[0].label, other or "—"),
        report.configs(comparisons),
        "Notes:\n" + report.notes(rows) if report.notes(rows) else "",
        _profiles(profile_dir, args.workloads) if profile_dir else "",
    ) if part)
    print(text)
    if args.markdown_path:
        Path(args.markdown_path).write_text(text + "\n")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"command": command, "sizes": dataclasses.asdict(sizes),
             "samples": [{"workload": s.workload, "repeat": s.repeat, "target": s.target,
                          **dataclasses.asdict(s.figure)} for s in samples]}, indent=1))
    failed = [s for s in samples if s.figure.note.startswith("n/a: failed")]
    return 1 if failed else 0


def _profiles(profile_dir: Path, workloads: list[str]) -> str:
    parts = [profile.render(w, profile.hot_spots(files))
             for w in workloads if (files := driver.profiles_of(profile_dir, w))]
    return "Profile of kgc (py-spy):\n\n" + "\n\n".join(parts) if parts else ""


def _run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
