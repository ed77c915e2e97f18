"""Which kgc instance owns which of the 50 partitions, when they share a replicated store.

The instances are members of one classic group on the upstream cluster
(`<state_topic>.owners`), with kgc's own protocol type `kgc` and protocol `kgc-sticky-v1`
(the pattern Kafka Connect and Schema Registry use). A member's metadata is JSON: its
coordinator node (id, host, port) and the partitions it owns now. The member the upstream
elects leader assigns (`assign`): a partition stays with a member that still owns it while
that member holds no more than its share, the rest go to the members with fewest, so adding
or removing an instance moves only what balance needs. Every member receives the whole map,
so any instance answers FindCoordinator for any group, and spreads the upstream brokers
over the live instances the same way as every other (`broker_instance`).

A partition changes hands without waiting for its old owner: the new owner's claim
(InitProducerId, replicated/store.py) fences the old owner's writes, so two instances never
both write one partition. The old owner releases what it lost as soon as its SyncGroup
answer tells it. A member that stops heartbeating is removed by the upstream after the
session timeout, and its partitions go to the others in the next generation. A planned stop
(`stop`) releases every partition first (drained: what was acknowledged is written) and
then leaves the group, so the others take them at once.

An instance answers for its partitions only while its membership is sure (`serving`): the
upstream keeps a member at least a session timeout after it took its last heartbeat (a
rebalance timeout while its JoinGroup waits), so this instance's own deadline, counted from
when it *sent* that request, never outlasts the upstream's. An instance paused past it (a
long GC, SIGSTOP, a lost network) wakes up answering NOT_COORDINATOR, not from a memory of
partitions that another instance may have taken and written meanwhile; once the upstream
says it was removed (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) it gives every partition up, so
one that comes back to it later is read again from the state topic.

`on_change(partitions)` is awaited with this instance's partitions after every generation,
one call at a time and apart from the heartbeats, which go on while partitions load.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from coordinator import metrics
from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable, call
from coordinator.partitioning import partition_for
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "kgc"
PROTOCOL_NAME = "kgc-sticky-v1"
CLIENT_ID = "kgc-ownership"
_JOIN_VERSION = 5
_SYNC_VERSION = 3
_HEARTBEAT_VERSION = 3
_LEAVE_VERSION = 3
_GROUP_KEY = 0
_BACKOFF_S = (0.1, 5.0)

_REFIND = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


@dataclass(frozen=True, slots=True)
class Instance:
    node_id: int
    host: str
    port: int
    # Its listener for upstream broker N: broker_port_base + N, or broker_ports[N].
    broker_port_base: int = 19092
    broker_ports: tuple[tuple[int, int], ...] = ()

    def broker_port(self, node_id: int) -> int:
        return dict(self.broker_ports).get(node_id, self.broker_port_base + node_id)

    def to_json(self) -> dict:
        return {"node_id": self.node_id, "host": self.host, "port": self.port,
                "broker_port_base": self.broker_port_base, "broker_ports": [list(p) for p in self.broker_ports]}

    @classmethod
    def from_json(cls, data: dict) -> Instance:
        return cls(data["node_id"], data["host"], data["port"], data["broker_port_base"],
                   tuple((int(n), int(p)) for n, p in data["broker_ports"]))


@dataclass(frozen=True, slots=True)
class Change:
    """One generation's effect here, for logs, metrics and /v1/ownership."""
    generation: int
    at: float                   # wall clock, seconds
    gained: frozenset[int]
    lost: frozenset[int]
    members: int
    took_ms: float              # from the rebalance's start to this instance's partitions loaded
    cause: str                  # which instances came and went, or why this one gave up


def assign(members: Mapping[str, frozenset[int]], num_partitions: int) -> dict[str, list[int]]:
    """Sticky and balanced: each member keeps what it owns up to its share, then the rest
    go to the members with fewest. Shares differ by one at most; the larger ones go to the
    members that own most now (fewer moves). Deterministic for the same input."""
    ids = sorted(members)
    if not ids:
        return {}
    base, extra = divmod(num_partitions, len(ids))
    by_owned = sorted(ids, key=lambda m: (-len(members[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_owned)}
    result: dict[str, list[int]] = {m: [] for m in ids}
    taken: set[int] = set()
    for m in by_owned:
        for p in sorted(members[m]):
            if 0 <= p < num_partitions and p not in taken and len(result[m]) < quota[m]:
                result[m].append(p)
                taken.add(p)
    for p in range(num_partitions):
        if p not in taken:
            m = min(ids, key=lambda m: (len(result[m]) - quota[m], len(result[m]), m))
            result[m].append(p)
    return {m: sorted(ps) for m, ps in result.items()}


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Ownership:
    def __init__(self, cluster: UpstreamCluster, group_id: str, me: Instance, num_partitions: int,
                 on_change: Callable[[frozenset[int]], Awaitable[None]], *, session_timeout_ms: int = 10_000,
                 heartbeat_interval_ms: int = 1_000, rebalance_timeout_ms: int = 30_000,
                 request_timeout_ms: int = 10_000, clock: Callable[[], int] = monotonic_ms):
        self.group_id = group_id
        self.me = me
        self.num_partitions = num_partitions
        self._cluster = cluster
        self._on_change = on_change
        self._session_timeout_ms = session_timeout_ms
        self._clock = clock
        self._lease_until: float = -math.inf      # `serving` until then (clock ms)
        self._heartbeat_s = heartbeat_interval_ms / 1000
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._timeout_s = request_timeout_ms / 1000
        self.owners: dict[int, Instance] = {}
        self.members: tuple[Instance, ...] = ()     # the live instances, by node id
        self.owned: frozenset[int] = frozenset()
        self.generation = -1
        self.member_id = ""
        self.leader = False         # this instance assigned the last generation
        self.history: list[Change] = []
        self._conn: UpstreamConnection | None = None
        self._ids = itertools.count(1)
        self._task: asyncio.Task | None = None
        self._applying: asyncio.Task | None = None
        self._stopping = False
        self._rebalance_started = clock()

    def serving(self) -> bool:
        """Whether this instance may answer for `owned` now: the upstream cannot have removed
        it from the group yet (see the module's docstring)."""
        return self._clock() < self._lease_until

    def holds(self, partition: int) -> bool:
        """Whether `partition` is this instance's now: the map gives it here and the lease holds
        (a lapsed instance must not claim it back: its claim would fence the owner of now)."""
        return partition in self.owned and self.serving()

    def _renew(self, sent: int, span_ms: int) -> None:
        self._lease_until = sent + span_ms

    def owner(self, group_id: str) -> Instance | None:
        return self.owners.get(partition_for(group_id, self.num_partitions))

    def broker_instance(self, node_id: int) -> Instance | None:
        """The instance whose listener every instance names for upstream broker `node_id`:
        the brokers spread over the live instances, so a lost one takes only its share of
        clients' connections, and their next Metadata sends them to a live one."""
        members = self.members
        return members[node_id % len(members)] if members else None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kgc-ownership")

    async def stop(self) -> None:
        """Release every partition (drained), then leave the group: the others take them now."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._applying is not None:
            await asyncio.gather(self._applying, return_exceptions=True)
        await self._on_change(frozenset())
        self.owned = frozenset()
        if self.member_id and self._conn is not None and self._conn.failure is None:
            request = LeaveGroupRequest[_LEAVE_VERSION](group_id=self.group_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=None)])
            try:
                await self._call(request, LeaveGroupResponse)
                log.info("ownership: left %s; its partitions move to the other instances", self.group_id)
            except (UpstreamUnavailable, TimeoutError, OSError) as exc:
                log.warning("ownership: could not leave %s (%r); the others wait for the session timeout",
                            self.group_id, exc)
        if self._conn is not None:
            await self._conn.close()

    # ---- the member's loop ---------------------------------------------------------------

    async def _run(self) -> None:
        backoff = _BACKOFF_S[0]
        while not self._stopping:
            try:
                await self._join_and_sync()
                backoff = _BACKOFF_S[0]
                await self._heartbeat_until_rebalance()
            except asyncio.CancelledError:
                raise
            except (UpstreamUnavailable, TimeoutError, OSError, _Rejoin) as exc:
                log.info("ownership: %s; joining %s again", exc, self.group_id)
                if isinstance(exc, _Removed):
                    self._give_up(str(exc))
                if not isinstance(exc, _Rejoin):
                    await self._drop_connection()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_S[1])
            except Exception:
                log.exception("ownership: unexpected failure; joining %s again", self.group_id)
                await self._drop_connection()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_S[1])

    async def _join_and_sync(self) -> None:
        self._rebalance_started = self._clock()
        metadata = json.dumps({**self.me.to_json(), "owned": sorted(self.owned)}).encode()
        join = JoinGroupRequest[_JOIN_VERSION](
            group_id=self.group_id, session_timeout_ms=self._session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms, member_id=self.member_id, group_instance_id=None,
            protocol_type=PROTOCOL_TYPE,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=PROTOCOL_NAME, metadata=metadata)])
        sent = self._clock()
        if self.serving():
            # A member whose JoinGroup waits for the others is kept until the rebalance timeout.
            self._renew(sent, self._rebalance_timeout_ms)
        # The upstream answers a JoinGroup once every member rejoined: up to the rebalance timeout.
        joined = await self._call(join, JoinGroupResponse, self._rebalance_timeout_ms / 1000 + self._timeout_s)
        code = ErrorCode(joined.error_code)
        if code is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = joined.member_id
            raise _Rejoin("member id assigned")
        self._check(code, "JoinGroup")
        # The join completed no earlier than it was sent; the session counts from there.
        self._renew(sent, self._session_timeout_ms)
        self.member_id, generation = joined.member_id, joined.generation_id
        self.leader = joined.leader == self.member_id
        assignments = []
        if self.leader:
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=data)
                           for m, data in self._lead(joined.members).items()]
        sent = self._clock()
        synced = await self._call(SyncGroupRequest[_SYNC_VERSION](
            group_id=self.group_id, generation_id=generation, member_id=self.member_id, group_instance_id=None,
            assignments=assignments), SyncGroupResponse)
        self._check(ErrorCode(synced.error_code), "SyncGroup")
        self._renew(sent, self._session_timeout_ms)
        self._adopt(generation, json.loads(synced.assignment))

    def _lead(self, members) -> dict[str, bytes]:
        instances: dict[str, Instance] = {}
        owned: dict[str, frozenset[int]] = {}
        for member in members:
            meta = json.loads(member.metadata)
            instances[member.member_id] = Instance.from_json(meta)
            owned[member.member_id] = frozenset(meta["owned"])
        nodes = [i.node_id for i in instances.values()]
        if len(set(nodes)) != len(nodes):
            log.error("ownership: several kgc instances use one node_id (%s): clients cannot tell their "
                      "coordinators apart; give each its own node_id", sorted(nodes))
        plan = assign(owned, self.num_partitions)
        owners = {m: {**i.to_json(), "partitions": plan[m]} for m, i in instances.items()}
        data = json.dumps({"owners": owners}).encode()
        log.info("ownership: leader of %s: %d instances, %s", self.group_id, len(instances),
                 {f"{i.host}:{i.port}": len(plan[m]) for m, i in instances.items()})
        return dict.fromkeys(instances, data)

    def _adopt(self, generation: int, assignment: dict) -> None:
        owners: dict[int, Instance] = {}
        members: list[Instance] = []
        mine: frozenset[int] = frozenset()
        for member_id, entry in assignment["owners"].items():
            instance = Instance.from_json(entry)
            members.append(instance)
            for p in entry["partitions"]:
                owners[p] = instance
            if member_id == self.member_id:
                mine = frozenset(entry["partitions"])
        self.generation, self.owners = generation, owners
        cause = _cause(self.members, members)
        self.members = tuple(sorted(members, key=lambda i: i.node_id))
        previous, self.owned = self.owned, mine
        count = len(members)
        started = self._rebalance_started
        log.info("ownership: generation %d of %s: %d instances (%s), %d partitions here (+%d -%d)", generation,
                 self.group_id, count, cause, len(mine), len(mine - previous), len(previous - mine))
        before = self._applying

        async def apply() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            if generation != self.generation:
                return      # a newer generation came meanwhile: its own apply takes its map
            await self._on_change(mine)
            change = Change(generation, time.time(), mine - previous, previous - mine, count,
                            self._clock() - started, cause)
            self._record(change, len(mine))
            if change.gained or change.lost:
                log.info("ownership: generation %d applied in %.0f ms (%s): gained %s, lost %s", generation,
                         change.took_ms, cause, sorted(change.gained), sorted(change.lost))
        self._applying = asyncio.get_running_loop().create_task(apply(), name="kgc-ownership-apply")

    async def _heartbeat_until_rebalance(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self._heartbeat_s)
            sent = self._clock()
            answer = await self._call(HeartbeatRequest[_HEARTBEAT_VERSION](
                group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=None), HeartbeatResponse)
            code = ErrorCode(answer.error_code)
            if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                self._renew(sent, self._session_timeout_ms)     # both mean: still a member
            self._check(code, "Heartbeat")

    def _check(self, code: ErrorCode, what: str) -> None:
        if code is ErrorCode.NONE:
            return
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            raise _Rejoin(f"{what}: a rebalance began")
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID):
            # Generations may have passed without this member: its partitions may have been
            # another's, and written, meanwhile.
            self.member_id = "" if code is ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
            self._lease_until = -math.inf
            raise _Removed(f"{what}: {code.name}")
        if code in _REFIND:
            raise UpstreamUnavailable(f"{what}: {code.name}")
        raise UpstreamUnavailable(f"{what} answered {code.name}")

    # ---- the connection to the group's coordinator upstream ----------------------------------

    async def _call(self, request, response_class, timeout_s: float | None = None):
        if self._conn is None or self._conn.failure is not None:
            self._conn = await self._find_coordinator()
        return await call(self._conn, next(self._ids), request, response_class, client_id=CLIENT_ID,
                          timeout_s=timeout_s or self._timeout_s)

    async def _find_coordinator(self) -> UpstreamConnection:
        found = await self._cluster.find_coordinator(self.group_id, _GROUP_KEY)
        return await self._cluster.own_connection(found.host, found.port)

    def _give_up(self, why: str) -> None:
        """Removed from the group: release every partition (drained), so that one given back
        later is read again from the state topic, and claim none when joining again. The
        release runs in the chain of generation applies (the next one waits for it), not in
        the member's loop, which rejoins meanwhile."""
        if not self.owned:
            return
        lost, self.owned = self.owned, frozenset()
        log.warning("ownership: %s; this instance was removed from %s, so it gives up its %d partitions",
                    why, self.group_id, len(lost))
        before = self._applying
        members = len(self.members)

        async def release() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            started = self._clock()
            await self._on_change(frozenset())
            change = Change(self.generation, time.time(), frozenset(), lost, members, self._clock() - started,
                            f"this instance removed ({why})")
            self._record(change, 0)
            log.info("ownership: gave up %d partitions in %.0f ms", len(lost), change.took_ms)
        self._applying = asyncio.get_running_loop().create_task(release(), name="kgc-ownership-give-up")

    def _record(self, change: Change, owned: int) -> None:
        self.history.append(change)
        del self.history[:-100]
        metrics.ownership_changed(owned, len(change.gained) + len(change.lost), change.took_ms / 1000)

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def _cause(before: tuple[Instance, ...], after: list[Instance]) -> str:
    """What changed the membership: the instances that joined and left, by address."""
    if not before:
        return f"this instance joined, {len(after)} in all"
    def names(instances) -> set[str]:
        return {f"{i.host}:{i.port}" for i in instances}
    joined, left = sorted(names(after) - names(before)), sorted(names(before) - names(after))
    parts = ([f"joined {', '.join(joined)}"] if joined else []) + ([f"left {', '.join(left)}"] if left else [])
    return "; ".join(parts) or "same instances (one rejoined, or the leader rebalanced)"


class _Rejoin(Exception):
    """The member must join again (a rebalance began, or its membership changed)."""


class _Removed(_Rejoin):
    """The upstream no longer counts this member in the group's generation."""
