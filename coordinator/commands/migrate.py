"""`kgc import` and `kgc export`: move consumer groups onto kgc ahead of time, and back.

Both speak the Kafka protocol to both sides with the same client kgc adopts with
(`coordinator.gateway.upstream_groups`), and are dry runs unless `--apply`:

- `kgc import --upstream HOST:PORT --bootstrap-server KGC [--group G ...] [--groups-file F]`
  lists the groups (ListGroups on every upstream broker, or the groups named, for a
  cluster whose ListGroups leaves some out), takes a snapshot of each
  at the upstream coordinator and prints what would be adopted. `--apply` asks kgc about
  each group (DescribeGroups), which adopts it as a first use would, and reads back kgc's
  offsets: a group with live members upstream is reported "waiting", not adopted.
- `kgc import --kafka-log DIR --data-dir KGC_DIR`: from a copy of a Kafka broker's
  `__consumer_offsets-N` directories, into kgc's data dir while kgc is stopped
  (`coordinator.offline.kafka_import`).
- `kgc export --upstream HOST:PORT --bootstrap-server KGC --group G ...` reads each
  group's offsets at kgc and, with `--apply`, commits them at the upstream coordinator
  (OffsetCommit with generation -1, as `kafka-consumer-groups --reset-offsets` does). A
  group with members on either side is refused unless `--force`: its consumers would
  overwrite the offsets, or consume from two places.
Exit status: 0 done, 1 something refused or failed (each line says why), 2 bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamUnavailable
from coordinator.gateway.upstream_groups import UpstreamGroups
from coordinator.group.adopt import UpstreamGroup

CONNECT_TIMEOUT_S = 10.0


def add_migrate_parsers(subparsers) -> None:
    imp = subparsers.add_parser("import", help="adopt consumer groups from the upstream cluster or a Kafka log "
                                               "(dry run unless --apply)")
    source = imp.add_mutually_exclusive_group(required=True)
    source.add_argument("--upstream", metavar="HOST:PORT", help="the cluster whose coordinator holds the groups")
    source.add_argument("--kafka-log", metavar="DIR", help="a copy of a Kafka broker's data dir "
                                                           "(its __consumer_offsets-N directories)")
    imp.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT",
                     help="kgc's listener, for --upstream (default %(default)s)")
    imp.add_argument("--data-dir", metavar="DIR", help="kgc's data dir, for --kafka-log (kgc must be stopped)")
    _add_group_selection(imp)
    imp.add_argument("--apply", action="store_true", help="adopt; without it, only print what would be adopted")
    imp.set_defaults(handler=run_import)

    exp = subparsers.add_parser("export", help="commit kgc's offsets for groups at the upstream coordinator "
                                               "(dry run unless --apply)")
    exp.add_argument("--upstream", metavar="HOST:PORT", required=True,
                     help="the cluster whose coordinator gets the offsets")
    exp.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT",
                     help="kgc's listener (default %(default)s)")
    _add_group_selection(exp)
    exp.add_argument("--force", action="store_true", help="export groups that have members on either side")
    exp.add_argument("--apply", action="store_true", help="commit; without it, only print what would be committed")
    exp.set_defaults(handler=run_export)


def _add_group_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)")
    p.add_argument("--groups-file", metavar="FILE", help="group ids, one a line")


def _named_groups(args: argparse.Namespace) -> list[str]:
    groups = list(args.group)
    if args.groups_file:
        groups += [line.strip() for line in Path(args.groups_file).read_text().splitlines() if line.strip()]
    return list(dict.fromkeys(groups))


def run_import(args: argparse.Namespace) -> int:
    if args.kafka_log:
        if not args.data_dir:
            print("kgc import: --kafka-log needs --data-dir (kgc's, with kgc stopped)", file=sys.stderr)
            return 2
        from coordinator.offline.kafka_import import run_kafka_log_import

        return run_kafka_log_import(args.kafka_log, args.data_dir, _named_groups(args) or None, args.apply)
    return _run(args, _import_from_upstream)


def run_export(args: argparse.Namespace) -> int:
    if not _named_groups(args):
        print("kgc export: name the groups (--group, --groups-file)", file=sys.stderr)
        return 2
    return _run(args, _export)


def _run(args: argparse.Namespace, job: Callable[..., Awaitable[int]]) -> int:
    from coordinator.offline.upstream import parse_host_port

    try:
        upstream = parse_host_port(args.upstream)
        kgc = parse_host_port(args.bootstrap_server)
    except ValueError as exc:
        print(f"kgc {args.command}: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_with_clients(upstream, kgc, lambda up, k: job(args, up, k)))


async def _with_clients(upstream: tuple[str, int], kgc: tuple[str, int],
                        job: Callable[[UpstreamGroups, UpstreamGroups], Awaitable[int]]) -> int:
    clusters = [UpstreamCluster([upstream]), UpstreamCluster([kgc])]
    clients = [UpstreamGroups(c) for c in clusters]
    try:
        for cluster, address in zip(clusters, (upstream, kgc), strict=True):
            cluster.start()
            try:
                await asyncio.wait_for(cluster.wait_reachable(), CONNECT_TIMEOUT_S)
            except TimeoutError:
                print(f"cannot reach {address[0]}:{address[1]}: {cluster.status}", file=sys.stderr)
                return 1
        return await job(*clients)
    finally:
        for client in clients:
            await client.close()
        for cluster in clusters:
            await cluster.close()


def _describe(group: UpstreamGroup) -> str:
    members = f", {len(group.members)} member(s)" if group.members else ""
    kind = f"{group.protocol_type!r} group" if group.protocol_type else "simple group"
    return f"{kind} in state {group.state}{members}, {len(group.offsets)} committed offset(s)"


def _offsets_line(group: UpstreamGroup) -> str:
    return " ".join(f"{o.topic}-{o.partition}={o.offset}" for o in sorted(group.offsets))


async def _import_from_upstream(args: argparse.Namespace, upstream: UpstreamGroups, kgc: UpstreamGroups) -> int:
    groups = _named_groups(args)
    if not groups:
        groups = await upstream.list_groups()
        if not groups:
            print("the upstream lists no groups: name them with --group or --groups-file")
            return 1
    failed = 0
    for group_id in groups:
        try:
            found = await upstream.snapshot(group_id)
        except UpstreamUnavailable as exc:
            print(f"{group_id}: cannot read it upstream: {exc}")
            failed += 1
            continue
        if not (found.offsets or found.protocol_type):
            print(f"{group_id}: unknown upstream, nothing to adopt")
            continue
        waiting = " (has live members upstream: kgc adopts it once they leave)" if found.live else ""
        if not args.apply:
            print(f"{group_id}: would adopt {_describe(found)}{waiting}: {_offsets_line(found)}")
            continue
        try:
            on_kgc = await kgc.snapshot(group_id)
        except UpstreamUnavailable as exc:
            print(f"{group_id}: not adopted: {exc}{waiting}")
            failed += 1
            continue
        print(f"{group_id}: adopted; kgc holds {_describe(on_kgc)}: {_offsets_line(on_kgc)}")
    return 1 if failed else 0


async def _export(args: argparse.Namespace, upstream: UpstreamGroups, kgc: UpstreamGroups) -> int:
    failed = 0
    for group_id in _named_groups(args):
        try:
            ours = await kgc.snapshot(group_id)
            theirs = await upstream.snapshot(group_id)
        except UpstreamUnavailable as exc:
            print(f"{group_id}: cannot read it: {exc}")
            failed += 1
            continue
        busy = [f"{len(g.members)} member(s) on {side}" for side, g in (("kgc", ours), ("the upstream", theirs))
                if g.live]
        if busy and not args.force:
            print(f"{group_id}: refused, it has {' and '.join(busy)} (stop them, or --force)")
            failed += 1
            continue
        if not ours.offsets:
            print(f"{group_id}: kgc holds no offsets for it, nothing to export")
            continue
        if not args.apply:
            print(f"{group_id}: would commit upstream: {_offsets_line(ours)}")
            continue
        try:
            await upstream.commit(group_id, ours.offsets)
        except UpstreamUnavailable as exc:
            print(f"{group_id}: commit failed: {exc}")
            failed += 1
            continue
        print(f"{group_id}: committed upstream: {_offsets_line(ours)}")
    return 1 if failed else 0
