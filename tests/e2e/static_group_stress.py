"""Form a static kafka-python group through kgc again and again, and say how each run went.

Each run is the first half of `test_a_static_member_restarted_within_its_session_...`:
a fresh 6-partition topic, three static kafka-python members (polling every 50 ms)
started with a random jitter, waited on until kgc calls the group Stable and every
member owns its share, and again a few seconds later. One Tansu and one kgc (at DEBUG)
serve all runs; kafka-python's coordinator log (DEBUG) of each run goes to its own file,
kept for a run that failed or stalled:

    .venv/bin/python -m tests.e2e.static_group_stress --runs 40 --burn 2 --out /tmp/stress

`--burn N` adds N niced busy loops (CPU contention), stopped by PID at the end.
`--recreate-topic` then deletes the topic (Tansu recreates it with other partitions), so
that the leader rejoins because its metadata changed, and waits for the group to settle
on the new partitions. Each run prints whether the group formed, how often a leader found
its metadata changed since it assigned (the trigger of the kafka-python fault in docs/troubleshooting.md,
"A kafka-python leader stops heartbeating after a metadata change"), and which member, if
any, completed a join (kgc's SyncGroup answer is in its log) but never applied it: that
member sends no heartbeat again, and its session expires ("STALLED").
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import pathlib
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator

from tests.support.admin import admin, create_topic, describe_group, member_assignments, new_name
from tests.support.clients import Member, MemberSettings, wait_until
from tests.support.kgc import KGC_GROUP_FLAGS, free_port, kgc_process, wait_listening
from tests.support.settled_members import FORM_TIMEOUT_S, PARTITIONS, close_all, wait_settled
from tests.support.tansu import TansuBroker

SESSION_TIMEOUT_MS = 10_000
MAX_JITTER_S = 0.3
# A leader rejoins when its metadata (refreshed every second) differs from what it
# assigned with: the group is held this long once Stable, then must be Stable again.
HOLD_S = 3.0
SNAPSHOT_REJOIN = "need_rejoin: True (assignment_snapshot != metadata_snapshot"
SYNC_ANSWER = re.compile(r"kafka-io-(\S+) .*Received SyncGroup response: .*error_code=0")
APPLIED = re.compile(r"kafka-io-(\S+) .*Enabling heartbeat")


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    procs = [subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


@contextlib.contextmanager
def client_log(path: pathlib.Path) -> Iterator[None]:
    """kafka-python's coordinator and metadata at DEBUG, everything else of kafka's at INFO."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s %(message)s"))
    kafka = logging.getLogger("kafka")
    kafka.addHandler(handler)
    kafka.setLevel(logging.INFO)
    verbose = [logging.getLogger(name) for name in ("kafka.coordinator", "kafka.cluster")]
    for logger in verbose:
        logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        kafka.removeHandler(handler)
        handler.close()


def abandoned_joins(log_text: str) -> list[str]:
    """Members whose last successful SyncGroup answer was never followed by the join's
    completion (kafka-python re-enables heartbeats when it applies an assignment)."""
    last_answer: dict[str, int] = {}
    last_applied: dict[str, int] = {}
    for number, line in enumerate(log_text.splitlines()):
        if m := SYNC_ANSWER.search(line):
            last_answer[m.group(1)] = number
        elif m := APPLIED.search(line):
            last_applied[m.group(1)] = number
    return sorted(member for member, at in last_answer.items() if last_applied.get(member, -1) < at)


def recreate_topic(kgc, group: str, topic: str, members: list[Member]) -> None:
    """Delete the topic: Tansu creates it again, with its default partition count, at the
    members' next metadata refresh, so the leader rejoins because its metadata changed.
    Waits until the group is Stable again on the new partitions."""
    client = admin(kgc.bootstrap)
    try:
        client.delete_topics([topic])
    finally:
        client.close()

    def settled_on_new_partitions() -> bool:
        own = {m.name: m.assignment for m in members}
        owned = sorted(p for a in own.values() for p in a)
        if not all(own.values()) or owned == list(range(PARTITIONS)) or owned != list(range(len(owned))):
            return False
        description = describe_group(kgc.bootstrap, group)
        return description["group_state"] == "Stable" and member_assignments(description) == own
    for _ in range(2):  # settled, and still settled once the leader's metadata is refreshed again
        wait_until(settled_on_new_partitions, FORM_TIMEOUT_S, lambda: {m.name: m.assignment for m in members},
                   members)
        time.sleep(HOLD_S)


def one_run(kgc, run: int, out: pathlib.Path, recreate: bool) -> tuple[bool, int, list[str]]:
    log_path = out / f"run-{run:03d}-clients.log"
    topic = create_topic(kgc.bootstrap, PARTITIONS)
    group = new_name("static")
    members: list[Member] = []
    formed = True
    with client_log(log_path):
        try:
            for i in range(3):
                time.sleep(random.uniform(0, MAX_JITTER_S))
                members.append(Member("kafka-python", MemberSettings(
                    kgc.bootstrap, group, topic, client_id=f"{group}-{i}", instance_id=f"instance-{i}",
                    session_timeout_ms=SESSION_TIMEOUT_MS)).start())
            try:
                wait_settled(kgc, group, members)
                time.sleep(HOLD_S)
                wait_settled(kgc, group, members)
                if recreate:
                    recreate_topic(kgc, group, topic, members)
            except AssertionError as exc:
                formed = False
                print(f"run {run}: {group} did not form: {exc}", flush=True)
        finally:
            close_all(members)
    text = log_path.read_text()
    abandoned = abandoned_joins(text)
    if formed and not abandoned:
        log_path.unlink()
    return formed, text.count(SNAPSHOT_REJOIN), abandoned


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--burn", type=int, default=0, help="niced busy loops for CPU contention")
    parser.add_argument("--recreate-topic", action="store_true",
                        help="then delete the topic, so that the leader rejoins on a metadata change")
    parser.add_argument("--out", default="static-group-stress", help="directory for the logs")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = stalled = rejoins = 0
    with TansuBroker() as broker, busy_loops(args.burn):
        broker_port = free_port()
        with kgc_process("--upstream", broker.bootstrap, "--broker-port", f"{broker.node_id}={broker_port}",
                         *KGC_GROUP_FLAGS, "--log-level", "DEBUG", log_path=str(out / "kgc.log")) as kgc:
            wait_listening(broker_port)
            for run in range(args.runs):
                started = time.monotonic()
                formed, snapshot_rejoins, abandoned = one_run(kgc, run, out, args.recreate_topic)
                failed += not formed
                stalled += bool(abandoned)
                rejoins += bool(snapshot_rejoins)
                status = "FAILED to form" if not formed else "STALLED" if abandoned else "formed"
                print(f"run {run}: {status} in {time.monotonic() - started:.1f} s, "
                      f"need_rejoin() calls that found a leader's metadata changed: {snapshot_rejoins}, "
                      f"joins completed but never applied: {abandoned or 'none'}", flush=True)
    print(f"{args.runs} runs, --burn {args.burn}, --recreate-topic {args.recreate_topic}: {failed} failed to form; "
          f"in {rejoins} a leader rejoined on a metadata change; in {stalled}, a member completed a join "
          f"and never applied it (it stops heartbeating: its session expires)", flush=True)


if __name__ == "__main__":
    main()
