"""`kgc groups`: consumer groups as `kafka-consumer-groups` shows and changes them.

It talks to a running kgc (or any Kafka cluster) over the Kafka protocol with
kafka-python's `KafkaAdminClient`, so it works wherever a client does, through TLS and
SASL too (`--security-protocol`, the password from the environment):

| subcommand | does |
|---|---|
| `list` | every group, with its state |
| `describe GROUP` | state, then per partition: committed offset, log end, lag, owning member (`--members`: the members) |
| `reset-offsets GROUP` | new committed offsets (earliest, latest, an offset, a date, a shift), printed; written only with `--execute`, only for a group with no members |
| `delete GROUP` | deletes a group with no members |
| `delete-offsets GROUP --topic T` | deletes a group's committed offsets for a topic (or some of its partitions) |

Lag is the log end (ListOffsets "latest" through the cluster) minus the committed offset,
or "-" with the reason below the table when it cannot be known (`coordinator.consumer_lag`).
Exit status: 0 done, 1 refused or failed (the message says why), 2 bad command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import datetime
from typing import Any

from coordinator.consumer_lag import partition_lag

REQUEST_TIMEOUT_MS = 10_000
# Not a flag: a password on the command line ends up in shell history and `ps`.
PASSWORD_ENV = "KGC_SASL_PASSWORD"
BOOTSTRAP_TIMEOUT_MS = 5_000
_EMPTY_STATES = {"Empty", "Dead"}


class GroupsCommandError(Exception):
    """Refused or failed: the message is the one line the user sees."""


def add_groups_parser(subparsers) -> None:
    p = subparsers.add_parser("groups", help="list, describe, reset and delete consumer groups (like "
                                             "kafka-consumer-groups)",
                              description="Consumer groups through a running kgc, over the Kafka protocol.")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT",
                   help="kgc's listener (default %(default)s)")
    p.add_argument("--security-protocol", default="PLAINTEXT", type=str.upper,
                   choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
                   help="of kgc's listener (default %(default)s)")
    p.add_argument("--sasl-mechanism", type=str.upper, choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                   help=f"with SASL_*; the password comes from the environment variable {PASSWORD_ENV}")
    p.add_argument("--sasl-username", metavar="USER", help="with SASL_*")
    p.add_argument("--ssl-cafile", metavar="FILE", help="CA bundle that signed kgc's certificate (SSL, SASL_SSL)")
    p.add_argument("--ssl-certfile", metavar="FILE", help="client certificate, when kgc asks for one")
    p.add_argument("--ssl-keyfile", metavar="FILE", help="the client certificate's key")
    sub = p.add_subparsers(dest="groups_command", required=True)
    sub.add_parser("list", help="every group and its state").set_defaults(groups_handler=run_list)
    describe = sub.add_parser("describe", help="offsets, log end and lag per partition")
    describe.add_argument("group", metavar="GROUP", help="the group id")
    describe.add_argument("--members", action="store_true", help="show the members and their assignments")
    describe.set_defaults(groups_handler=run_describe)
    reset = sub.add_parser("reset-offsets", help="set a group's committed offsets (dry run unless --execute)")
    reset.add_argument("group", metavar="GROUP", help="the group id")
    targets = reset.add_mutually_exclusive_group(required=True)
    targets.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                         help="a topic, or some of its partitions (repeatable)")
    targets.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the log end")
    to.add_argument("--to-offset", type=int, metavar="OFFSET", help="this offset (clamped to the log)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[+ZZ:ZZ]",
                    help="the first offset at or after this time (ISO 8601; no zone: local time)")
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (negative: back)")
    reset.add_argument("--execute", action="store_true", help="write the new offsets (default: only show them)")
    reset.set_defaults(groups_handler=run_reset)
    delete = sub.add_parser("delete", help="delete a group with no members")
    delete.add_argument("group", metavar="GROUP", help="the group id")
    delete.set_defaults(groups_handler=run_delete)
    delete_offsets = sub.add_parser("delete-offsets", help="delete a group's offsets for a topic")
    delete_offsets.add_argument("group", metavar="GROUP", help="the group id")
    delete_offsets.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P...]",
                                help="a topic, or some of its partitions (repeatable)")
    delete_offsets.set_defaults(groups_handler=run_delete_offsets)
    p.set_defaults(handler=run_groups)


def security_settings(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python's settings for the listener's security protocol."""
    settings: dict[str, Any] = {"security_protocol": args.security_protocol}
    if args.security_protocol.startswith("SASL_"):
        settings.update(sasl_mechanism=args.sasl_mechanism or "PLAIN", sasl_plain_username=args.sasl_username,
                        sasl_plain_password=os.environ.get(PASSWORD_ENV))
    if args.security_protocol.endswith("SSL"):
        settings.update(ssl_cafile=args.ssl_cafile, ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile)
    return settings


def run_groups(args: argparse.Namespace, out=None) -> int:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    out = out or sys.stdout
    # kafka-python logs each retry of an unreachable bootstrap; the one line below says it once.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    try:
        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="kgc-groups",
                                 request_timeout_ms=REQUEST_TIMEOUT_MS, bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                                 **security_settings(args))
    except KafkaError as exc:
        print(f"kgc groups: cannot reach {args.bootstrap_server} ({type(exc).__name__}: {exc}); "
              "check --bootstrap-server", file=sys.stderr)
        return 1
    try:
        return args.groups_handler(admin, args, out)
    except GroupsCommandError as exc:
        print(f"kgc groups: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        print(f"kgc groups {args.groups_command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()


# -- list and describe ----------------------------------------------------------------------


def run_list(admin, args, out) -> int:
    # The admin client asks every broker Metadata names and concatenates the answers; kgc's
    # own node and each broker listener are all kgc, so each group comes back once per
    # listener. One row per group, as Kafka's admin client (kafka-consumer-groups --list) keeps.
    unique = {g["group_id"]: g for g in admin.list_groups()}
    groups = [unique[group_id] for group_id in sorted(unique)]
    _table(out, ["GROUP", "STATE", "PROTOCOL-TYPE"],
           [[g["group_id"], g.get("group_state") or "-", g.get("protocol_type") or "-"] for g in groups])
    return 0


def describe_group(admin, group: str) -> dict[str, Any]:
    """The group's state, members and, per committed partition, offset, log end and lag."""
    from kafka.protocol.consumer import OffsetSpec

    description = admin.describe_groups([group])[group]
    committed = admin.list_group_offsets({group: None})[group]
    owners = {}
    for member in description["members"]:
        for topic in (member.get("member_assignment") or {}).get("assigned_partitions", []):
            for p in topic["partitions"]:
                owners[(topic["topic"], p)] = member
    partitions = sorted({(tp.topic, tp.partition) for tp in committed} | set(owners))
    ends, end_error = _log_ends(admin, partitions, OffsetSpec.LATEST)
    rows = []
    for topic, p in partitions:
        meta = next((m for tp, m in committed.items() if (tp.topic, tp.partition) == (topic, p)), None)
        offset = meta.offset if meta is not None and meta.offset >= 0 else None
        lag = partition_lag(offset, ends.get((topic, p)), end_error)
        rows.append({"topic": topic, "partition": p, "committed": offset, "log_end": ends.get((topic, p)),
                     "lag": lag.value, "lag_unknown_reason": lag.reason, "member": owners.get((topic, p))})
    return {"group": group, "state": description["group_state"], "members": description["members"],
            "protocol": description.get("protocol"), "partitions": rows, "coordinator": _coordinator(admin, group)}


def _coordinator(admin, group: str) -> str | None:
    """Where the group's coordinator is (with several kgc instances, the one that owns the
    group's partition), as the FindCoordinator answer describe_groups used gave it: the
    admin client keeps it. Kafka's kafka-consumer-groups shows it under COORDINATOR (ID)."""
    try:
        cluster = admin._manager.cluster        # kafka-python 3 keeps no public accessor
    except AttributeError:
        return None
    node_id = cluster.get_coordinator(group)
    broker = cluster.broker_metadata(node_id) if node_id is not None else None
    return None if broker is None else f"{broker.host}:{broker.port} ({node_id})"


def _log_ends(admin, partitions, spec) -> tuple[dict[tuple[str, int], int], str | None]:
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    if not partitions:
        return {}, None
    try:
        found = admin.list_partition_offsets({TopicPartition(t, p): spec for t, p in partitions})
    except KafkaError as exc:
        return {}, f"log end offsets unavailable: {type(exc).__name__}: {exc}"
    return {(tp.topic, tp.partition): o.offset for tp, o in found.items()}, None


def run_describe(admin, args, out) -> int:
    view = describe_group(admin, args.group)
    if view["state"] == "Dead" and not view["partitions"]:
        raise GroupsCommandError(f"group {args.group} does not exist")
    print(f"Group {args.group} is {view['state']} with {len(view['members'])} member(s)"
          + (f", protocol {view['protocol']}" if view["protocol"] else "")
          + (f"; coordinator {view['coordinator']}" if view["coordinator"] else "") + ".", file=out)
    print(file=out)
    reasons: dict[str, str] = {}
    rows = []
    for r in view["partitions"]:
        member = r["member"] or {}
        lag = _show(r["lag"])
        if r["lag"] is None and r["lag_unknown_reason"]:
            mark = reasons.setdefault(r["lag_unknown_reason"], "*" * (len(reasons) + 1))
            lag = "-" + mark
        rows.append([args.group, r["topic"], r["partition"], _show(r["committed"]), _show(r["log_end"]), lag,
                     member.get("member_id", "-"), member.get("client_host", "-"), member.get("client_id", "-")])
    _table(out, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID"], rows)
    for reason, mark in reasons.items():
        print(f"{mark} lag unknown: {reason}", file=out)
    if args.members:
        print(file=out)
        _table(out, ["CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], [[
            m["member_id"], m["client_host"], m["client_id"],
            sum(len(t["partitions"]) for t in _assigned(m)),
            " ".join(f"{t['topic']}({','.join(map(str, sorted(t['partitions'])))})" for t in _assigned(m)) or "-",
        ] for m in view["members"]])
    return 0


def _assigned(member: dict) -> list[dict]:
    return (member.get("member_assignment") or {}).get("assigned_partitions", [])


# -- changes ----------------------------------------------------------------------------------


def _require_empty(admin, group: str, action: str) -> None:
    state = admin.describe_groups([group])[group]
    if state["group_state"] not in _EMPTY_STATES:
        raise GroupsCommandError(
            f"refusing to {action} group {group}: it is {state['group_state']} with {len(state['members'])} "
            "member(s); stop its consumers first (kgc only changes groups with no members)")


def _partitions_of(admin, specs: list[str]) -> list[tuple[str, int]]:
    out = []
    for spec in specs:
        topic, _, listed = spec.partition(":")
        if listed:
            try:
                out += [(topic, int(p)) for p in listed.split(",")]
            except ValueError:
                raise GroupsCommandError(f"bad --topic {spec!r}: partitions are numbers, as TOPIC:0,1,2") from None
            continue
        described = admin.describe_topics([topic])
        partitions = [p["partition_index"] for t in described for p in t.get("partitions", [])]
        if not partitions:
            raise GroupsCommandError(f"topic {topic} has no partitions the cluster knows of")
        out += [(topic, p) for p in sorted(partitions)]
    return out


def plan_reset(admin, args) -> list[dict[str, Any]]:
    """Per partition: the committed offset now and the one the reset would write."""
    from kafka import TopicPartition
    from kafka.protocol.consumer import OffsetSpec

    committed = {(tp.topic, tp.partition): m.offset
                 for tp, m in admin.list_group_offsets({args.group: None})[args.group].items()}
    partitions = sorted(committed) if args.all_topics else _partitions_of(admin, args.topic)
    if not partitions:
        raise GroupsCommandError(f"group {args.group} has no committed offsets to reset")
    earliest, error = _log_ends(admin, partitions, OffsetSpec.EARLIEST)
    latest, error2 = _log_ends(admin, partitions, OffsetSpec.LATEST)
    if error or error2:
        raise GroupsCommandError(error or error2)
    targets: dict[tuple[str, int], int] = {}
    if args.to_datetime is not None:
        when = _parse_datetime(args.to_datetime)
        found = admin.list_partition_offsets({TopicPartition(t, p): when for t, p in partitions})
        targets = {(tp.topic, tp.partition): o.offset for tp, o in found.items()}
    plan = []
    for tp in partitions:
        low, high = earliest[tp], latest[tp]
        current = committed.get(tp)
        if args.to_earliest:
            new = low
        elif args.to_latest:
            new = high
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            if current is None or current < 0:
                raise GroupsCommandError(f"cannot shift {tp[0]}:{tp[1]}: group {args.group} has no offset for it")
            new = current + args.shift_by
        else:
            new = targets.get(tp, -1)
            new = high if new < 0 else new   # nothing at or after that time: the end, as Kafka's tool does
        # Kafka's tool clamps to what the log holds, so a reset never points outside it.
        plan.append({"topic": tp[0], "partition": tp[1], "current": current, "new": min(max(new, low), high)})
    return plan


def _parse_datetime(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise GroupsCommandError(f"bad --to-datetime {text!r}: use ISO 8601, e.g. 2026-11-25T07:00:00+00:00") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def run_reset(admin, args, out) -> int:
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    _require_empty(admin, args.group, "reset offsets of")
    plan = plan_reset(admin, args)
    _table(out, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
           [[args.group, r["topic"], r["partition"], _show(r["current"]), r["new"]] for r in plan])
    if not args.execute:
        print("\nDry run: nothing changed. Add --execute to write these offsets.", file=out)
        return 0
    _require_empty(admin, args.group, "reset offsets of")   # still empty, just before writing
    errors = admin.alter_group_offsets(args.group, {
        TopicPartition(r["topic"], r["partition"]): OffsetAndMetadata(r["new"], "", -1) for r in plan})
    failed = {f"{tp.topic}:{tp.partition}": e.__name__ for tp, e in errors.items() if e.errno != 0}
    if failed:
        raise GroupsCommandError(f"some offsets were not written: {failed}")
    print(f"\nWrote {len(plan)} offset(s) for group {args.group}.", file=out)
    return 0


def run_delete(admin, args, out) -> int:
    _require_empty(admin, args.group, "delete")
    result = dict(admin.delete_groups([args.group]))
    error = result.get(args.group)
    if error is not None and getattr(error, "errno", 0) != 0:
        raise GroupsCommandError(f"group {args.group} not deleted: {error.__name__}")
    print(f"Deleted group {args.group}.", file=out)
    return 0


def run_delete_offsets(admin, args, out) -> int:
    from kafka import TopicPartition

    committed = {(tp.topic, tp.partition) for tp in admin.list_group_offsets({args.group: None})[args.group]}
    partitions: list[tuple[str, int]] = []
    for spec in args.topic:
        topic, _, listed = spec.partition(":")
        partitions += (_partitions_of(admin, [spec]) if listed
                       else sorted(tp for tp in committed if tp[0] == topic))
    if not partitions:
        raise GroupsCommandError(f"group {args.group} has no offsets for {', '.join(args.topic)}")
    errors = admin.delete_group_offsets(args.group, [TopicPartition(t, p) for t, p in partitions])
    _table(out, ["TOPIC", "PARTITION", "STATUS"],
           [[tp.topic, tp.partition, "Deleted" if e.errno == 0 else e.__name__] for tp, e in sorted(errors.items())])
    return 1 if any(e.errno != 0 for e in errors.values()) else 0


# -- output -----------------------------------------------------------------------------------


def _show(value) -> str:
    return "-" if value is None else str(value)


def _table(out, header: list[str], rows: list[list[Any]]) -> None:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
