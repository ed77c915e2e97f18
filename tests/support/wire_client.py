"""A raw Kafka connection for tests that attack kgc: kafka-python request objects out,
decoded responses back, in request order (the bench's `BenchConnection` underneath).

A client library would refuse to send most hostile requests (repeated protocol names,
ids longer than the record format holds); this sends whatever the request object holds.
"""

from __future__ import annotations

import asyncio

from coordinator.bench.wire import BenchConnection
from protocol.errors import ErrorCode
from protocol.messages import response_class
from tests.support.builders import heartbeat_request, join_request, subscription, sync_request


class WireClient:
    def __init__(self, conn: BenchConnection, client_id: str):
        self._conn = conn
        self._client_id = client_id

    @classmethod
    async def open(cls, port: int, client_id: str = "wire-test") -> WireClient:
        return cls(await BenchConnection.open("127.0.0.1", port), client_id)

    def send(self, request) -> asyncio.Future:
        """Send now; the future gets the decoded response (for requests that park)."""
        cid = self._conn.next_correlation_id()
        request.with_header(correlation_id=cid, client_id=self._client_id)
        payload = self._conn.send(bytes(request.encode(header=True, framed=True)), cid)
        cls = response_class(request.API_KEY)
        version = request.API_VERSION
        return asyncio.ensure_future(_decoded(payload, cls, version))

    async def call(self, request, timeout_s: float = 10.0):
        return await asyncio.wait_for(self.send(request), timeout_s)

    def close(self) -> None:
        self._conn.close()


async def _decoded(payload: asyncio.Future, cls, version: int):
    return cls.decode(await payload, version=version, header=True)


class RawMember:
    """A classic group member speaking JoinGroup/SyncGroup/Heartbeat v9/v5/v4 over its own
    `WireClient`, as a client library would, but with whatever protocols and ids the test
    gives it."""

    def __init__(self, client: WireClient, group: str, *, protocols=None, instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 5_000):
        self.client = client
        self.group = group
        self.protocols = protocols if protocols is not None else (("range", subscription("t")),)
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.leader = ""

    def send_join(self) -> asyncio.Future:
        return self.client.send(join_request(
            9, self.group, self.member_id, protocols=self.protocols, group_instance_id=self.instance_id,
            session_timeout_ms=self.session_timeout_ms, rebalance_timeout_ms=self.rebalance_timeout_ms))

    async def join(self, timeout_s: float = 10.0):
        """One join round: the MEMBER_ID_REQUIRED step if needed, then the join's answer."""
        response = await asyncio.wait_for(self.send_join(), timeout_s)
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            response = await asyncio.wait_for(self.send_join(), timeout_s)
        if response.error_code == ErrorCode.NONE:
            self.member_id, self.generation, self.leader = (response.member_id, response.generation_id,
                                                            response.leader)
        return response

    async def sync(self, assignments=()):
        return await self.client.call(sync_request(
            5, self.group, self.member_id, self.generation, group_instance_id=self.instance_id,
            assignments=assignments))

    async def heartbeat(self) -> int:
        response = await self.client.call(heartbeat_request(
            4, self.group, self.member_id, self.generation, group_instance_id=self.instance_id))
        return response.error_code

    async def join_and_sync(self, timeout_s: float = 10.0) -> int:
        """Join, then sync (as leader: everyone gets b"x"); the sync's error code."""
        joined = await self.join(timeout_s)
        if joined.error_code != ErrorCode.NONE:
            return joined.error_code
        assignments = [(m.member_id, b"x") for m in joined.members] if self.leader == self.member_id else ()
        return (await self.sync(assignments)).error_code

    async def until_stable(self, timeout_s: float = 15.0) -> None:
        """Rejoin and sync as a client would until a generation is Stable for this member."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        code = await self.join_and_sync()
        while code != ErrorCode.NONE:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{self.group}: no stable generation (last error {code})")
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            await asyncio.sleep(0.05)
            code = await self.join_and_sync()
