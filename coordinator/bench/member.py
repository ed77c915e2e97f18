"""A simulated group member that behaves like a classic consumer, and the bookkeeping
that says when a group has settled.

A member asks FindCoordinator about its group on the target's address, as every client
does before its first JoinGroup, and sends the group's requests to the coordinator the
answer names (`router.Router`: its own connection when that is the target's address, else
one more, opened then). It joins (twice when the coordinator asks for a member id,
KIP-394), syncs (the leader hands out the topic's partitions round-robin), then heartbeats
every `heartbeat_interval_ms`. A heartbeat or sync answered REBALANCE_IN_PROGRESS or
ILLEGAL_GENERATION sends it back to JoinGroup; UNKNOWN_MEMBER_ID makes it join afresh;
NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE makes it find the coordinator again first.
That is what librdkafka and the Java client do, and it works against coordinators that
park joins (Kafka, kgc) and against ones that answer them at once and let the members
retry (Tansu).

A `Phase` is settled when every member it expects holds a successful SyncGroup on one
generation (at least `min_generation`): then nobody is rebalancing any more. It records
when the first request of the phase was sent (a FindCoordinator when a member is new), when
its last JoinGroup was sent, and when it settled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from coordinator.bench import messages
from coordinator.bench.router import MAX_ROUNDS, MOVED, RETRY, RETRY_BACKOFF_S, BenchError, Router, error_name
from coordinator.bench.wire import BenchConnection
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TOPIC = "bench-topic"
TOPIC_PARTITIONS = 64

_REJOIN = (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION)


@dataclass(frozen=True, slots=True)
class Settled:
    """A settled phase: its generation, and when (perf_counter ns) its first request and
    its last JoinGroup were sent and it settled."""

    generation: int
    first_ns: int
    last_join_ns: int
    settled_ns: int


class Phase:
    def __init__(self, expected: list[Member], min_generation: int = 0):
        self.expected = set(expected)
        self.min_generation = min_generation
        self.synced: dict[Member, int] = {}
        self.settled = asyncio.Event()
        self.first_ns: int | None = None
        self.last_join_ns: int | None = None
        self.settled_ns: int | None = None
        self.generation: int | None = None

    def asked(self, at_ns: int) -> None:
        """A member sent its FindCoordinator."""
        if self.first_ns is None and not self.settled.is_set():
            self.first_ns = at_ns

    def join_sent(self, at_ns: int) -> None:
        if self.settled.is_set():
            return
        if self.first_ns is None:
            self.first_ns = at_ns
        self.last_join_ns = at_ns

    def lost(self, member: Member) -> None:
        self.synced.pop(member, None)

    def sync_done(self, member: Member, generation: int, at_ns: int) -> None:
        if member not in self.expected or self.settled.is_set():
            return
        self.synced[member] = generation
        if (generation >= self.min_generation and len(self.synced) == len(self.expected)
                and all(g == generation for g in self.synced.values())):
            self.generation = generation
            self.settled_ns = at_ns
            self.settled.set()

    def progress(self) -> str:
        generations = sorted(set(self.synced.values()))
        return f"{len(self.synced)}/{len(self.expected)} synced, generations {generations}"

    def result(self) -> Settled:
        """What the phase measured, once it has settled."""
        if (self.generation is None or self.first_ns is None or self.last_join_ns is None
                or self.settled_ns is None):
            raise BenchError(f"phase not settled, or settled with no JoinGroup sent in it ({self.progress()})")
        return Settled(self.generation, self.first_ns, self.last_join_ns, self.settled_ns)


class Member:
    """An eager classic member: whatever it held is given up at every rebalance, and the
    leader hands out the topic's partitions round-robin afresh."""

    assignor = messages.ASSIGNOR

    def __init__(self, conn: BenchConnection, group: str, *, session_timeout_ms: int,
                 rebalance_timeout_ms: int, heartbeat_interval_ms: int):
        # `conn` is to the target's address; `self.conn` becomes the connection to the
        # coordinator FindCoordinator names (the same one when it names that address).
        self.router = Router(conn)
        self.conn = conn
        self.group = group
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.phase: Phase | None = None
        self.joins_sent = 0
        # Set by `stop` from another task while `run` awaits.
        self._stopping = asyncio.Event()
        self._metadata = messages.subscription(TOPIC)

    async def _call(self, request) -> bytes:
        cid = self.conn.next_correlation_id()
        return await self.conn.send(messages.encode(request, cid), cid)

    async def find_coordinator(self) -> None:
        """Ask FindCoordinator on the target's address, as a member does when it starts and
        when told its coordinator moved; its requests go to the address named from then on."""
        self.router.forget(self.group)
        self.conn = await self.router.connection(self.group, on_ask=self._asked)

    def _asked(self, at_ns: int) -> None:
        if self.phase is not None:
            self.phase.asked(at_ns)

    async def join_and_sync(self) -> None:
        for _ in range(MAX_ROUNDS):
            if self.phase is not None:
                self.phase.lost(self)
                self.phase.join_sent(time.perf_counter_ns())
            self.joins_sent += 1
            join = messages.decode_join(await self._call(messages.join_request(
                self.group, self.member_id, self.session_timeout_ms, self.rebalance_timeout_ms, self._subscription(),
                self.assignor)))
            if join.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if not await self._carry_on(join.error_code, "JoinGroup"):
                continue
            self.member_id = join.member_id
            self.generation = join.generation_id
            self.leader_id = join.leader
            sync = messages.decode_sync(await self._call(messages.sync_request(
                self.group, self.generation, self.member_id, self._assign(join))))
            if await self._carry_on(sync.error_code, "SyncGroup"):
                if not self._assigned(sync.assignment):
                    continue
                if self.phase is not None:
                    self.phase.sync_done(self, self.generation, time.perf_counter_ns())
                return
        raise BenchError(f"[group={self.group}] {self.member_id} did not settle in {MAX_ROUNDS} joins")

    async def _carry_on(self, code: int, api: str) -> bool:
        """True on NONE; False (after any reset or backoff) when the member must rejoin."""
        if code == ErrorCode.NONE:
            return True
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        elif code in RETRY:
            await asyncio.sleep(RETRY_BACKOFF_S)
            if code in MOVED:
                await self.find_coordinator()
        elif code not in _REJOIN:
            raise BenchError(f"[group={self.group}] {api} failed: {error_name(code)}")
        return False

    def _subscription(self) -> bytes:
        return self._metadata

    def _assigned(self, assignment: bytes) -> bool:
        """Takes the SyncGroup's assignment; False when the member must rejoin at once."""
        return True

    def _assign(self, join) -> dict[str, bytes]:
        if join.leader != join.member_id:
            return {}
        ids = sorted(m.member_id for m in join.members)
        return {mid: messages.assignment(TOPIC, range(i, TOPIC_PARTITIONS, len(ids))) for i, mid in enumerate(ids)}

    async def heartbeat(self) -> int:
        template = messages.heartbeat_template(self.group, self.generation, self.member_id)
        cid = self.conn.next_correlation_id()
        return messages.heartbeat_error(await self.conn.send(template.frame(cid), cid))

    async def run(self) -> None:
        """Find the coordinator, join, then heartbeat and rejoin whenever told to, until `stop()`."""
        await self.find_coordinator()
        await self.join_and_sync()
        while not self._stopping.is_set():
            await asyncio.sleep(self.heartbeat_interval_s)
            if self._stopping.is_set():
                return
            code = await self.heartbeat()
            if code != ErrorCode.NONE and not await self._carry_on(code, "Heartbeat"):
                await self.join_and_sync()

    def stop(self) -> None:
        self._stopping.set()

    async def leave(self) -> int:
        leave = messages.decode_leave(await self._call(messages.leave_request(self.group, self.member_id)))
        return leave.error_code

    def close(self) -> None:
        self.router.close()


class Swarm:
    """Members of one or more groups, each on its own connection, running as tasks."""

    def __init__(self, members: list[Member]):
        self.members = members
        self.tasks: dict[Member, asyncio.Task] = {}

    def start(self) -> None:
        for member in self.members:
            self.tasks[member] = asyncio.create_task(member.run(), name=f"member {member.group}")

    async def until(self, phases: list[Phase], timeout_s: float) -> None:
        """Wait until every phase settles; a member that fails fails the wait."""
        waiters = [asyncio.create_task(p.settled.wait()) for p in phases]
        try:
            async with asyncio.timeout(timeout_s):
                pending = set(waiters)
                while pending:
                    done, _ = await asyncio.wait(pending | set(self.tasks.values()),
                                                 return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if task not in waiters and (failure := task.exception()) is not None:
                            raise failure
                        if task not in waiters:
                            self.tasks = {m: t for m, t in self.tasks.items() if t is not task}
                    pending -= done
        except TimeoutError:
            states = "; ".join(p.progress() for p in phases if not p.settled.is_set())[:300]
            raise TimeoutError(f"not settled after {timeout_s:.0f}s ({states})") from None
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def stop(self, members: list[Member] | None = None) -> None:
        """Stop members' loops and wait for them (a request in flight finishes first)."""
        chosen = members or list(self.tasks)
        for member in chosen:
            member.stop()
        tasks = [self.tasks.pop(m) for m in chosen if m in self.tasks]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=30)
            for task in pending:
                task.cancel()
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.debug("member stopped with %r", task.exception())

    async def one_leaves(self, min_generation: int, timeout_s: float) -> tuple[Phase, int]:
        """A follower stops and sends LeaveGroup; returns the others' phase, once they are
        synced on `min_generation` or later, and when the LeaveGroup was sent (perf_counter ns)."""
        leaver = next(m for m in reversed(self.members) if m.member_id != m.leader_id)
        await self.stop([leaver])
        rest = [m for m in self.members if m is not leaver]
        phase = Phase(rest, min_generation=min_generation)
        for member in rest:
            member.phase = phase
        left_ns = time.perf_counter_ns()
        code = await leaver.leave()
        if code != 0:
            raise BenchError(f"LeaveGroup failed with error {code}")
        await self.until([phase], timeout_s)
        return phase, left_ns

    async def one_joins(self, newcomer: Member, min_generation: int, timeout_s: float) -> tuple[Phase, int]:
        """`newcomer` (on its own connection, not started) joins the running members; returns
        the phase of all of them, once they are synced on `min_generation` or later, and
        when the newcomer started (perf_counter ns), just before its FindCoordinator."""
        phase = Phase([*self.tasks, newcomer], min_generation=min_generation)
        for member in phase.expected:
            member.phase = phase
        self.members.append(newcomer)
        started_ns = time.perf_counter_ns()
        self.tasks[newcomer] = asyncio.create_task(newcomer.run(), name=f"member {newcomer.group}")
        await self.until([phase], timeout_s)
        return phase, started_ns

    async def leave(self) -> None:
        """Stop every member and send LeaveGroup for each that has an id, so the group is
        gone before whatever is measured next (errors ignored: this is cleanup)."""
        await self.stop()
        await asyncio.gather(*(m.leave() for m in self.members if m.member_id), return_exceptions=True)

    async def close(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()
        for member in self.members:
            member.close()
