"""Cut-over on first use: a group kgc has never seen is adopted from the upstream coordinator.

The service asks `ensure(group)` before the first JoinGroup, ConsumerGroupHeartbeat,
OffsetCommit, OffsetFetch, OffsetDelete or DescribeGroups of a group not yet `settled`;
afterwards a set lookup is all a request pays. A member's FindCoordinator, which comes
first, starts it (`prefetch`), so the upstream's answer is on its way while the client
connects to kgc for its first JoinGroup. `ensure`:
1. asks the group's partition whether kgc knows the group (its log has it): settled;
2. else takes a snapshot of it at the upstream coordinator (`GroupSource`): state,
   members, committed offsets;
3. while it has live members there, refuses with COORDINATOR_LOAD_IN_PROGRESS, which
   every client retries with its state kept, so no second group forms over the same
   partitions (logged when the waiting members change, and exported as
   kgc_adoption_waiting_upstream_members{group}). The refused members are not members
   of anything on kgc, so they can neither leave nor time out there; a group stops
   waiting (log line, gauge removed) once nobody asked about it within the asker's
   session timeout (a JoinGroup's own, else `default_wait_ms`): its members gave up;
4. else writes what it found through the partition's normal write path
   (`GroupShard.adopt`: records stamped adopted_from=upstream and the time), durable
   before any request about the group is answered; a group unknown upstream is settled
   with nothing written, as today.
An upstream that cannot be reached or answers an error refuses the request the same
retriable way: a failure is never taken for an empty group. Concurrent requests about one
group share one attempt.

What survives a restart is the log: a group kgc adopted keeps its AdoptedGroup record
after it is deleted or expires (`coordinator.group.adopt`), so `knows` stays true and kgc
never adopts it twice over offsets of its own. A group found unknown upstream is settled
with nothing written: after a restart it is asked about again, which is harmless, kgc
having no offsets of its own for it that the upstream's could be older than.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from coordinator import metrics
from coordinator.group.adopt import UpstreamGroup
from coordinator.partitioning import partition_for
from coordinator.runtime.api import RuntimeApi
from protocol.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)

SOURCE_UPSTREAM = "upstream"
class StillUpstream(ApiError):
    """Refused: the group still has live members at the upstream coordinator."""

    def __init__(self, group: UpstreamGroup):
        super().__init__(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                         f"group {group.group_id} still has {len(group.members)} member(s) at the upstream "
                         f"coordinator; it forms on kgc once they have left")


@dataclass(slots=True)
class _Waiting:
    members: tuple[str, ...]   # who the group waits for, upstream
    until_ms: int              # when its members at kgc count as gone unless one asks again


class GroupSource(Protocol):
    """The upstream coordinator (`coordinator.gateway.upstream_groups.UpstreamGroups`);
    raises OSError (ConnectionError, TimeoutError) when it cannot answer."""

    async def snapshot(self, group_id: str) -> UpstreamGroup: ...


class Adoption:
    def __init__(self, runtime: RuntimeApi, source: GroupSource, *, clock: Callable[[], int],
                 default_wait_ms: int):
        self._runtime = runtime
        self._source = source
        self._clock = clock
        self._default_wait_ms = default_wait_ms
        self.settled: set[str] = set()
        self._pending: dict[str, asyncio.Future] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._prefetching: set[asyncio.Future] = set()

    def prefetch(self, group_id: str) -> None:
        """`ensure(group_id)` with nobody waiting on it: a request about the group that
        comes while it runs shares it, one that comes after has the group settled or starts
        its own attempt (an error here is not kept)."""
        if group_id in self.settled or group_id in self._pending:
            return
        started = asyncio.ensure_future(self.ensure(group_id))
        self._prefetching.add(started)      # the loop keeps only a weak reference to a task
        started.add_done_callback(self._prefetched)

    def _prefetched(self, done: asyncio.Future) -> None:
        self._prefetching.discard(done)
        if not done.cancelled():
            done.exception()    # retrieved: the group's next request has its own outcome

    async def ensure_all(self, group_ids: Iterable[str | None], session_timeout_ms: int | None = None) -> None:
        """`session_timeout_ms`: how long the asking member lives without asking again
        (a JoinGroup's); None for requests that say not (`default_wait_ms`)."""
        unsettled = [g for g in dict.fromkeys(group_ids) if g and g not in self.settled]
        if len(unsettled) == 1:
            await self.ensure(unsettled[0], session_timeout_ms)
        elif unsettled:
            outcomes = await asyncio.gather(*(self.ensure(g, session_timeout_ms) for g in unsettled),
                                            return_exceptions=True)
            error = next((x for x in outcomes if isinstance(x, BaseException)), None)
            if error is not None:
                raise error

    async def ensure(self, group_id: str, session_timeout_ms: int | None = None) -> None:
        attempt = self._pending.get(group_id)
        if attempt is None:
            attempt = self._pending[group_id] = asyncio.ensure_future(self._settle(group_id))
            attempt.add_done_callback(lambda done: self._forget(group_id, done))
        try:
            # Shielded: one client giving up does not cancel the attempt the others wait on.
            await asyncio.shield(attempt)
        except StillUpstream:
            self._asked(group_id, session_timeout_ms or self._default_wait_ms)
            raise

    def expire_waiting(self) -> None:
        """Stop waiting for the groups nobody at kgc asked about in time (run by a loop
        timer at the earliest deadline)."""
        self._expiry = None
        now = self._clock()
        for group_id, waiting in list(self._waiting.items()):
            if waiting.until_ms <= now:
                log.info("[group=%s] no member waits on kgc any more (none asked again within its session "
                         "timeout): stops waiting for its %d upstream member(s)", group_id, len(waiting.members))
                self._stop_waiting(group_id)
        self._arm()

    def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for started in list(self._prefetching):
            started.cancel()

    def _forget(self, group_id: str, done: asyncio.Future) -> None:
        if self._pending.get(group_id) is done:
            del self._pending[group_id]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter has seen it already

    async def _settle(self, group_id: str) -> None:
        partition = partition_for(group_id, self._runtime.num_partitions)
        if await self._runtime.read(partition, lambda shard: shard.knows(group_id)):
            self.settled.add(group_id)
            return
        try:
            upstream = await self._source.snapshot(group_id)
        except OSError as exc:
            metrics.adoption("unreachable")
            log.warning("[group=%s] cannot adopt from upstream, answering retriable errors: %s", group_id, exc)
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           f"kgc cannot reach the upstream coordinator to adopt group {group_id}: {exc}") from exc
        if upstream.live:
            self._wait(upstream)
            raise StillUpstream(upstream)
        self._stop_waiting(group_id)
        adopted = await self._runtime.write(partition, lambda shard, handle: shard.adopt(
            group_id, upstream.protocol_type, upstream.offsets, SOURCE_UPSTREAM))
        self.settled.add(group_id)
        if adopted:
            metrics.adoption("adopted")
            log.info("[group=%s] adopted from upstream: state %s, protocol type %r, %d committed offset(s)",
                     group_id, upstream.state, upstream.protocol_type, len(upstream.offsets))
        else:
            metrics.adoption("new")
            log.debug("[group=%s] unknown upstream: starts empty", group_id)

    def _wait(self, upstream: UpstreamGroup) -> None:
        group_id, members = upstream.group_id, upstream.members
        metrics.adoption("waiting")
        waiting = self._waiting.get(group_id)
        if waiting is None:
            waiting = self._waiting[group_id] = _Waiting(members, self._clock())
        elif waiting.members == members:
            return
        waiting.members = members   # logged when who we wait for changes
        log.info("[group=%s] waits for %d upstream member(s) to leave before it forms on kgc: %s",
                 group_id, len(members), ", ".join(members) or f"(state {upstream.state})")
        metrics.adoption_waiting(group_id, len(members))

    def _asked(self, group_id: str, wait_ms: int) -> None:
        waiting = self._waiting.get(group_id)
        if waiting is not None:
            waiting.until_ms = max(waiting.until_ms, self._clock() + wait_ms)
            self._arm()

    def _arm(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self._waiting:
            delay_ms = min(w.until_ms for w in self._waiting.values()) - self._clock()
            self._expiry = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, self.expire_waiting)

    def _stop_waiting(self, group_id: str) -> None:
        if self._waiting.pop(group_id, None) is not None:
            metrics.adoption_waiting_done(group_id)
