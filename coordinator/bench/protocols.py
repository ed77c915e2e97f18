"""`kgc bench protocols`: the KIP-848 consumer group protocol against the classic one,
both served by kgc (in front of Tansu, which has the topic) in one run, so that the
machine's noise falls on both alike.

    kgc bench protocols [--members 50] [--partitions 200] [--heartbeat-interval-ms 100]
                        [--duration-s 5] [--repeats 3]

Simulated members speak the protocol directly (no client library in the loop), one
connection each, heartbeating every `--heartbeat-interval-ms` (the same for both
protocols, since either learns of a change only at its next heartbeat):

- KIP-848 members send ConsumerGroupHeartbeat v1 with the partitions they hold and
  give up revoked partitions at once. Settled means: every member at one epoch, and the
  topic's partitions split among them within one partition each, none held twice.
- classic eager members: JoinGroup, SyncGroup (the leader assigns round robin),
  Heartbeat; a rebalance is settled when every member is synced on the new generation.
- classic cooperative members (`bench/cooperative.py`, cooperative-sticky as the Java
  client and librdkafka run it): members send what they hold, the leader holds back the
  partitions that change owner, their owners revoke them and rejoin, and a second
  rebalance hands them out; settled is every member synced on one generation with its
  final share (the same topic and partition count as the KIP-848 group).

Figures: time for a group of `--members` to absorb one more member, and to lose one
(a leave), and heartbeat round trips per second with every member sending flat out. Then,
in this process, the server-side assignors' run time for a large group
(`--assignor-members` × `--assignor-partitions`, over 20 topics).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from coordinator.bench import messages
from coordinator.bench.cooperative import CooperativeMember
from coordinator.bench.member import BenchError, Member, Phase, Swarm
from coordinator.bench.targets import HOST, Target, probe_api_versions, stop_process, wait_ready
from coordinator.bench.wire import BenchConnection, Template
from coordinator.embedded import EmbeddedBroker, free_port
from coordinator.group.consumer.assignors import AssignmentMember, range_, uniform
from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from protocol.errors import ErrorCode

TOPIC = "bench-kip848"
TIMEOUT_S = 120.0
_ERROR_CODE = struct.Struct(">h")
_HB = ConsumerGroupHeartbeatRequest
_T = TypeVar("_T")


class ConsumerProtocolMember:
    """A KIP-848 member that holds exactly what the coordinator last gave it."""

    def __init__(self, conn: BenchConnection, group: str, interval_ms: int, on_answer) -> None:
        self.conn = conn
        self.group = group
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}
        self.interval_s = interval_ms / 1000
        self.on_answer = on_answer
        self.stopping = False

    async def heartbeat(self, epoch: int | None = None) -> None:
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0
        request = _HB(version=1, group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                      instance_id=None, rack_id=None, rebalance_timeout_ms=30_000 if joining else -1,
                      subscribed_topic_names=[TOPIC] if joining else None, subscribed_topic_regex=None,
                      server_assignor=None, topic_partitions=[
                          _HB.TopicPartitions(version=1, topic_id=t, partitions=ps) for t, ps in self.owned.items()])
        cid = self.conn.next_correlation_id()
        payload = await self.conn.send(messages.encode(request, cid), cid)
        response = messages.decode(ConsumerGroupHeartbeatResponse, 1, payload)
        if response.error_code != ErrorCode.NONE:
            raise BenchError(f"{self.member_id}: {ErrorCode(response.error_code).name}: {response.error_message}")
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = {t.topic_id: list(t.partitions) for t in response.assignment.topic_partitions}
        self.on_answer()

    def steady_template(self) -> Template:
        """The heartbeat a client sends between changes (epoch and member id, nothing else),
        encoded once, as the classic members' Heartbeat is."""
        request = _HB(version=1, group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                      instance_id=None, rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                      subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)
        return Template(messages.encode(request, 0))

    async def steady_heartbeat(self, template: Template) -> None:
        cid = self.conn.next_correlation_id()
        payload = await self.conn.send(template.frame(cid), cid)
        # response header v1 (correlation id, no tagged fields), throttle_time_ms, error_code
        if _ERROR_CODE.unpack_from(payload, 9)[0] != ErrorCode.NONE:
            raise BenchError(f"{self.member_id}: steady heartbeat refused")

    async def run(self) -> None:
        while not self.stopping:
            await self.heartbeat()
            await asyncio.sleep(self.interval_s)

    async def leave(self) -> None:
        self.stopping = True
        await self.heartbeat(epoch=-1)


class ConsumerProtocolGroup:
    def __init__(self, target: Target, group: str, partitions: int, interval_ms: int):
        self.target, self.group, self.partitions, self.interval_ms = target, group, partitions, interval_ms
        self.members: list[ConsumerProtocolMember] = []
        self.tasks: dict[ConsumerProtocolMember, asyncio.Task] = {}
        # What `settle` waits for: when (perf_counter) the group is next seen settled.
        self._settled: asyncio.Future[float] | None = None

    def _check(self) -> None:
        counts = [sum(len(ps) for ps in m.owned.values()) for m in self.members]
        held = [(t, p) for m in self.members for t, ps in m.owned.items() for p in ps]
        if (len({m.epoch for m in self.members}) == 1 and sum(counts) == self.partitions == len(set(held))
                and max(counts) - min(counts) <= 1):
            if self._settled is not None and not self._settled.done():
                self._settled.set_result(time.perf_counter())

    async def add(self, n: int) -> None:
        for _ in range(n):
            member = ConsumerProtocolMember(await self.target.connect(), self.group, self.interval_ms, self._check)
            self.members.append(member)
            self.tasks[member] = asyncio.create_task(member.run())

    async def settle(self) -> float:
        settled = self._settled = asyncio.get_running_loop().create_future()
        async with asyncio.timeout(TIMEOUT_S):
            done, _ = await asyncio.wait([settled, *self.tasks.values()], return_when=asyncio.FIRST_COMPLETED)
        if not settled.done():
            for task in done:
                task.result()
            raise BenchError(f"[group={self.group}] a member stopped before the group settled")
        return settled.result()

    async def remove_one(self) -> None:
        member = self.members.pop()
        task = self.tasks.pop(member)
        member.stopping = True
        await task
        await member.leave()

    async def close(self) -> None:
        for member, task in self.tasks.items():
            member.stopping = True
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        for member in self.members:
            member.conn.close()


async def consumer_protocol_rebalances(target: Target, members: int, partitions: int, interval_ms: int,
                                       group: str) -> tuple[float, float]:
    cg = ConsumerProtocolGroup(target, group, partitions, interval_ms)
    try:
        await cg.add(members)
        await cg.settle()
        started = time.perf_counter()
        await cg.add(1)
        absorbed = await cg.settle() - started
        started = time.perf_counter()
        await cg.remove_one()
        lost = await cg.settle() - started
        return absorbed * 1000, lost * 1000
    finally:
        await cg.close()


async def classic_rebalances(target: Target, members: int, interval_ms: int, group: str,
                             partitions: int | None = None) -> tuple[float, float]:
    """Eager members; cooperative-sticky ones on the topic's `partitions` when given."""
    conns = [await target.connect() for _ in range(members + 1)]
    settings = {"session_timeout_ms": 6_000, "rebalance_timeout_ms": 6_000, "heartbeat_interval_ms": interval_ms}
    if partitions is None:
        everyone = [Member(c, group, **settings) for c in conns]
    else:
        everyone = [CooperativeMember(c, group, topic=TOPIC, partitions=partitions, **settings) for c in conns]
    swarm = Swarm(everyone[:members])
    try:
        first = Phase(swarm.members)
        for m in swarm.members:
            m.phase = first
        swarm.start()
        await swarm.until([first], TIMEOUT_S)
        joined, started = await swarm.one_joins(everyone[members], first.result().generation + 1, TIMEOUT_S)
        grown = joined.result()
        left, left_ns = await swarm.one_leaves(grown.generation + 1, TIMEOUT_S)
        return (grown.settled_ns - started) / 1e6, (left.result().settled_ns - left_ns) / 1e6
    finally:
        await swarm.close()


async def _flat_out(call, end: float, count: list[int]) -> None:
    while time.perf_counter() < end:
        await call()
        count[0] += 1


async def heartbeat_rates(target: Target, members: int, partitions: int, duration_s: float,
                          group: str) -> tuple[float, float]:
    cg = ConsumerProtocolGroup(target, group + "-new", partitions, 100)
    await cg.add(members)
    await cg.settle()
    for member in cg.tasks:
        member.stopping = True
    await asyncio.gather(*cg.tasks.values())
    new_count = [0]
    end = time.perf_counter() + duration_s
    templates = {m: m.steady_template() for m in cg.members}
    await asyncio.gather(*(_flat_out(lambda m=m: m.steady_heartbeat(templates[m]), end, new_count)
                           for m in cg.members))
    cg.tasks.clear()
    await cg.close()

    conns = [await target.connect() for _ in range(members)]
    swarm = Swarm([Member(c, group + "-classic", session_timeout_ms=6_000, rebalance_timeout_ms=6_000,
                          heartbeat_interval_ms=100) for c in conns])
    phase = Phase(swarm.members)
    for m in swarm.members:
        m.phase = phase
    swarm.start()
    try:
        await swarm.until([phase], TIMEOUT_S)
        await swarm.stop()
        classic_count = [0]

        async def beat(m: Member) -> None:
            if await m.heartbeat() != 0:
                raise BenchError("classic heartbeat failed")

        end = time.perf_counter() + duration_s
        await asyncio.gather(*(_flat_out(lambda m=m: beat(m), end, classic_count) for m in swarm.members))
    finally:
        await swarm.close()
    return new_count[0] / duration_s, classic_count[0] / duration_s


def assignor_times(members: int, partitions: int, topics: int = 20) -> list[tuple[str, float]]:
    """Milliseconds per assignor run: a fresh group, the same group absorbing one member
    (sticky: from the previous target), and a heterogeneous group (member i subscribes to
    the first 1 + i % topics topics), for uniform; a fresh group for range."""
    ids = [uuid.UUID(int=i + 1) for i in range(topics)]
    counts = {t: partitions // topics for t in ids}
    same = [AssignmentMember(f"member-{i:05d}", None, frozenset(ids)) for i in range(members)]
    mixed = [AssignmentMember(f"member-{i:05d}", None, frozenset(ids[:1 + i % topics])) for i in range(members)]

    def timed(run: Callable[[], _T]) -> tuple[float, _T]:
        started = time.perf_counter()
        out = run()
        return (time.perf_counter() - started) * 1000, out

    label = f"{members} members x {partitions} partitions"
    fresh_ms, previous = timed(lambda: uniform(same, counts, {}))
    grown = [*same, AssignmentMember("member-new", None, frozenset(ids))]
    return [(f"uniform assignor, {label}, fresh (ms)", fresh_ms),
            (f"uniform assignor, {label}, one member more (ms)", timed(lambda: uniform(grown, counts, previous))[0]),
            (f"uniform assignor, {label}, heterogeneous (ms)", timed(lambda: uniform(mixed, counts, {}))[0]),
            (f"range assignor, {label}, fresh (ms)", timed(lambda: range_(same, counts, {}))[0])]


@contextlib.asynccontextmanager
async def kgc_in_front_of_tansu(work_dir: Path, interval_ms: int, partitions: int):
    """Tansu with the topic, and kgc in front of it."""
    with EmbeddedBroker(log_path=str(work_dir / "tansu.log")) as tansu:
        host, tansu_port = tansu.address
        upstream = Target("tansu", host, tansu_port, "", None, await probe_api_versions(host, tansu_port))
        await upstream.create_topic(TOPIC, partitions)
        port, broker_port = free_port(), free_port()
        log_path = work_dir / "kgc.log"
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", "coordinator", "serve", "--host", HOST, "--port", str(port),
                 "--upstream", tansu.bootstrap, "--broker-port", f"{tansu.node_id}={broker_port}",
                 "--http-port", "0", "--initial-rebalance-delay-ms", "0", "--data-dir", str(work_dir / "data"),
                 "--consumer-heartbeat-interval-ms", str(interval_ms), "--log-level", "WARNING"],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                advertised = await wait_ready(HOST, port, process, "kgc", log_path=log_path)
                yield Target("kgc", HOST, port, "kgc fsync=always in front of Tansu", process.pid, advertised)
            finally:
                await stop_process(process)


async def run(members: int, partitions: int, interval_ms: int, duration_s: float, repeats: int,
              assignor_members: int, assignor_partitions: int) -> str:
    work_dir = Path(tempfile.mkdtemp(prefix="kgc-bench-protocols-"))
    rows: dict[str, list[float]] = {}
    try:
        async with kgc_in_front_of_tansu(work_dir, interval_ms, partitions) as target:
            # Wait for kgc's view of the upstream's topics (refreshed every few seconds).
            probe = ConsumerProtocolGroup(target, "bench-probe", partitions, interval_ms)
            await probe.add(1)
            await probe.settle()
            await probe.close()
            for r in range(repeats):
                new = await consumer_protocol_rebalances(target, members, partitions, interval_ms, f"new-{r}")
                eager = await classic_rebalances(target, members, interval_ms, f"classic-{r}")
                cooperative = await classic_rebalances(target, members, interval_ms, f"cooperative-{r}", partitions)
                rates = await heartbeat_rates(target, members, partitions, duration_s, f"hb-{r}")
                for i, change in enumerate(("absorbs one member", "loses one member")):
                    for protocol, figures in (("KIP-848", new), ("classic eager", eager),
                                              ("classic cooperative", cooperative)):
                        rows.setdefault(f"{members}-member group {change}, {protocol} (ms)", []).append(figures[i])
                rows.setdefault(f"heartbeats/s, {members} members flat out, KIP-848", []).append(rates[0])
                rows.setdefault(f"heartbeats/s, {members} members flat out, classic", []).append(rates[1])
                for name, value in assignor_times(assignor_members, assignor_partitions):
                    rows.setdefault(name, []).append(value)
                print(f"run {r + 1}/{repeats} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return _table(rows, members, partitions, interval_ms)


def _table(rows: dict[str, list[float]], members: int, partitions: int, interval_ms: int) -> str:
    """Rebalances and heartbeats (8 rows, in `run`'s order), their ratios, then the assignors."""
    names = list(rows)
    median = {name: statistics.median(values) for name, values in rows.items()}
    lines = [f"| figure ({members} members, {partitions} partitions, heartbeat every {interval_ms} ms) "
             f"| median | runs |", "|---|---:|---|"]
    for name in names[:8]:
        lines.append(f"| {name} | {median[name]:,.0f} | {', '.join(f'{v:,.0f}' for v in rows[name])} |")
    for first in (0, 3):
        change = names[first].split(",")[0]
        for other, protocol in ((first + 1, "classic eager"), (first + 2, "classic cooperative")):
            lines.append(f"| {protocol} / KIP-848, {change} | {median[names[other]] / median[names[first]]:.2f}× | |")
    lines.append(f"| KIP-848 / classic, heartbeats/s | {median[names[6]] / median[names[7]]:.2f}× | |")
    lines += [f"| {name} | {median[name]:,.1f} | {', '.join(f'{v:,.1f}' for v in rows[name])} |" for name in names[8:]]
    return "\n".join(lines)


def add_protocols_parser(subparsers) -> None:
    p = subparsers.add_parser("protocols", help="KIP-848 vs classic group protocol on kgc, in one run")
    p.add_argument("--members", type=int, default=50, help="members of each group (default %(default)s)")
    p.add_argument("--partitions", type=int, default=200,
                   help="partitions of the topic the KIP-848 group consumes (default %(default)s)")
    p.add_argument("--heartbeat-interval-ms", type=int, default=100,
                   help="every member's heartbeat interval, both protocols (default %(default)s)")
    p.add_argument("--duration-s", type=float, default=5.0,
                   help="measured window of the flat-out heartbeats (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="runs of every figure (default %(default)s)")
    p.add_argument("--assignor-members", type=int, default=1000,
                   help="members of the group the assignors are timed on (default %(default)s)")
    p.add_argument("--assignor-partitions", type=int, default=2000,
                   help="partitions (over 20 topics) the assignors are timed on (default %(default)s)")


def run_protocols(args: argparse.Namespace) -> int:
    print(asyncio.run(run(args.members, args.partitions, args.heartbeat_interval_ms, args.duration_s,
                          args.repeats, args.assignor_members, args.assignor_partitions)))
    return 0
