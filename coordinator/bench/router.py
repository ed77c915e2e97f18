"""Where a simulated client sends a group's requests: to the coordinator that
FindCoordinator names for that group, as Kafka's clients do.

A `Router` is one client's: it holds that client's connection to the target's address
(the bootstrap), asks FindCoordinator on it about a group the first time the group is
used, and keeps one connection per coordinator address (host, port) that an answer names,
opened once, with the bootstrap's TLS context. When the answer names the bootstrap's own
address, the bootstrap connection is the coordinator's: a target that coordinates every
group itself (one kgc, Tansu, a Kafka node that leads every `__consumer_offsets`
partition) sees exactly the connections and requests it saw before the bench routed.

A coordinator found is kept until the client is told it moved (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE: `forget`), as a client keeps it. A connection opened here is
opened when first needed, so inside whatever the caller is timing, as a real client's
would be.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from coordinator.bench import messages
from coordinator.bench.wire import BenchConnection
from protocol.errors import ErrorCode

Address = tuple[str, int]

RETRY_BACKOFF_S = 0.01
MAX_ROUNDS = 10_000    # attempts per step: a bound, never reached by a sane target

# Answers after which a client tries again; after the first two it finds the coordinator anew.
RETRY = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
         ErrorCode.NOT_COORDINATOR)
MOVED = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
# A set-up request may also meet a topic the bench has just created and the coordinator's
# broker does not know yet: Kafka's controller answers CreateTopics before every broker has
# the topic, and a coordinator on another broker answers commits to it UNKNOWN_TOPIC_OR_PARTITION
# until then (retriable, as Kafka's clients treat it).
SET_UP_RETRY = (*RETRY, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class BenchError(Exception):
    """The target answered something a consumer could not carry on from."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Router:
    """One client's connections: its bootstrap, and one per coordinator address it found."""

    def __init__(self, bootstrap: BenchConnection):
        if bootstrap.address is None:
            raise ValueError("a Router starts from a connection made by BenchConnection.open")
        self.bootstrap = bootstrap
        self._by_address: dict[Address, BenchConnection] = {bootstrap.address: bootstrap}
        self._by_group: dict[str, BenchConnection] = {}
        self._opening = asyncio.Lock()

    async def connection(self, group: str, on_ask: Callable[[int], None] | None = None) -> BenchConnection:
        """The connection to `group`'s coordinator: FindCoordinator on the bootstrap the
        first time (or after `forget`), retried while the answer is retriable (bounded);
        `on_ask(perf_counter_ns)` is told as each FindCoordinator is sent."""
        conn = self._by_group.get(group)
        if conn is None:
            address = await self._find(group, on_ask)
            async with self._opening:
                conn = self._by_address.get(address)
                if conn is None:
                    conn = await BenchConnection.open(*address, tls=self.bootstrap.tls)
                    self._by_address[address] = conn
            self._by_group[group] = conn
        return conn

    def forget(self, group: str) -> None:
        """The coordinator of `group` moved: the next `connection` asks again."""
        self._by_group.pop(group, None)

    async def _find(self, group: str, on_ask: Callable[[int], None] | None) -> Address:
        for _ in range(MAX_ROUNDS):
            if on_ask is not None:
                on_ask(time.perf_counter_ns())
            cid = self.bootstrap.next_correlation_id()
            request = messages.encode(messages.find_coordinator_request(group), cid)
            found = messages.decode_find_coordinator(await self.bootstrap.send(request, cid))
            if found.error_code == ErrorCode.NONE:
                return found.host, found.port
            if found.error_code not in RETRY:
                raise BenchError(f"[group={group}] FindCoordinator failed: {error_name(found.error_code)}")
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise BenchError(f"[group={group}] no coordinator found in {MAX_ROUNDS} attempts")

    async def request(self, group: str, frame: Callable[[int], bytes], error_of: Callable[[bytes], int]) -> bytes:
        """A set-up request about `group`, sent to its coordinator: `frame(correlation_id)`
        is sent again while `error_of(answer)` is retriable (bounded), to the coordinator
        found anew after NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE. Returns the last answer."""
        code: int = ErrorCode.NONE
        for _ in range(MAX_ROUNDS):
            conn = await self.connection(group)
            cid = conn.next_correlation_id()
            payload = await conn.send(frame(cid), cid)
            code = error_of(payload)
            if code not in SET_UP_RETRY:
                return payload
            if code in MOVED:
                self.forget(group)
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise BenchError(f"[group={group}] still {error_name(code)} after {MAX_ROUNDS} attempts")

    @property
    def connections(self) -> list[BenchConnection]:
        return list(self._by_address.values())

    def close(self) -> None:
        for conn in self._by_address.values():
            conn.close()
