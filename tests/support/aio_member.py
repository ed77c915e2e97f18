"""A classic-protocol group member built on aiokafka's client and protocol classes.

aiokafka's consumer coordinator only joins for subscribed topics it can see in metadata;
this member drives JoinGroup/SyncGroup/Heartbeat/OffsetCommit/OffsetFetch/LeaveGroup
through aiokafka's own request builders and connections, as its coordinator does, so the
wire bytes are aiokafka's.

Like a real client, the member rides out a coordinator restart: its group loop and
`fetch` retry, for up to `retry_window_s`, on connection errors and on the coordinator
errors a client retries (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, looking the coordinator up again). `commit` never retries: a caller
counting acknowledged commits must see exactly which ones failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError
from aiokafka.protocol.commit import OffsetCommitRequest, OffsetFetchRequest
from aiokafka.protocol.group import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

GROUP_COORDINATOR = 0
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
RETRIABLE_CODES = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
RETRY_BACKOFF_S = 0.05


class CoordinatorUnavailable(Exception):
    """The coordinator stayed unreachable (or kept refusing) for the whole retry window."""


@dataclass
class Assignment:
    generation: int
    partitions: list[int] = field(default_factory=list)


class AioMember:
    def __init__(self, bootstrap: str, group: str, topic: str, num_partitions: int, *,
                 client_id: str, session_timeout_ms: int = 2000, heartbeat_ms: int = 100,
                 retry_window_s: float = 20.0):
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.num_partitions = num_partitions
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_ms = heartbeat_ms
        self.retry_window_s = retry_window_s
        self.member_id = ""
        self.assignment: Assignment | None = None
        self.generations: list[int] = []
        self.client: AIOKafkaClient | None = None
        self.coordinator_id: int | None = None
        self.heartbeats_ok = 0
        self.retries = 0
        self._task: asyncio.Task | None = None

    async def connect(self) -> None:
        """Bootstrap and find the coordinator, without joining (enough to commit as a
        simple group: generation -1, no member id)."""
        self.client = AIOKafkaClient(bootstrap_servers=self.bootstrap, client_id=self.client_id)
        await self.client.bootstrap()
        self.coordinator_id = await self.client.coordinator_lookup(GROUP_COORDINATOR, self.group)

    async def start(self) -> None:
        await self.connect()
        self._task = asyncio.create_task(self._run())

    async def send(self, request):
        return await self.client.send(self.coordinator_id, request, group=ConnectionGroup.COORDINATION)

    async def send_retrying(self, request, error_codes=lambda resp: [resp.error_code]):
        """`send` until the response carries no retriable error code, riding out
        connection errors and coordinator moves, for at most `retry_window_s`."""
        deadline = time.monotonic() + self.retry_window_s
        while True:
            try:
                resp = await self.send(request)
            except KafkaError as e:
                if not e.retriable:
                    raise
                failure = e
            else:
                codes = set(error_codes(resp)) & RETRIABLE_CODES
                if not codes:
                    return resp
                failure = f"error codes {sorted(codes)}"
                if codes - {COORDINATOR_LOAD_IN_PROGRESS}:
                    await self._lookup_coordinator()
            if time.monotonic() > deadline:
                raise CoordinatorUnavailable(f"{self.client_id}: still failing after "
                                             f"{self.retry_window_s}s: {failure}")
            self.retries += 1
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _lookup_coordinator(self) -> None:
        with contextlib.suppress(KafkaError):
            self.coordinator_id = await self.client.coordinator_lookup(GROUP_COORDINATOR, self.group)

    async def _join_and_sync(self) -> None:
        metadata = ConsumerProtocolMemberMetadata(0, [self.topic], b"").encode()
        while True:
            resp = await self.send_retrying(JoinGroupRequest(self.group, self.session_timeout_ms, 10_000, self.member_id,
                                                    None, "consumer", [("range", metadata)]))
            if resp.error_code == MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            assert resp.error_code == 0, resp
            self.member_id = resp.member_id
            break
        group_assignment = []
        if resp.leader_id == self.member_id:
            members = sorted(m[0] for m in resp.members)
            for i, member in enumerate(members):
                parts = [p for p in range(self.num_partitions) if p % len(members) == i]
                group_assignment.append(
                    (member, ConsumerProtocolMemberAssignment(0, [(self.topic, parts)], b"").encode()))
        sync = await self.send_retrying(SyncGroupRequest(self.group, resp.generation_id, self.member_id, None,
                                                group_assignment))
        if sync.error_code == REBALANCE_IN_PROGRESS:
            return
        assert sync.error_code == 0, sync
        decoded = ConsumerProtocolMemberAssignment.decode(sync.member_assignment)
        parts = [p for topic, ps in decoded.assignment for p in ps if topic == self.topic]
        self.assignment = Assignment(resp.generation_id, sorted(parts))
        self.generations.append(resp.generation_id)

    async def _run(self) -> None:
        while True:
            await self._join_and_sync()
            while self.assignment is not None:
                await asyncio.sleep(self.heartbeat_ms / 1000)
                hb = await self.send_retrying(HeartbeatRequest(self.group, self.assignment.generation,
                                                               self.member_id))
                if hb.error_code == REBALANCE_IN_PROGRESS:
                    self.assignment = None
                else:
                    assert hb.error_code == 0, hb
                    self.heartbeats_ok += 1

    async def commit(self, offsets: dict[int, int]) -> list:
        gen = self.assignment.generation if self.assignment else -1
        resp = await self.send(OffsetCommitRequest(
            self.group, gen, self.member_id, -1,
            [(self.topic, [(p, off, "meta") for p, off in offsets.items()])]))
        return [err for _, parts in resp.topics for _, err in parts]

    async def fetch(self, partitions: list[int]) -> dict[int, int]:
        resp = await self.send_retrying(OffsetFetchRequest(self.group, [(self.topic, partitions)]),
                                        _offset_fetch_errors)
        errors = [code for code in _offset_fetch_errors(resp) if code]
        assert not errors, resp
        return {p: off for _, parts in resp.topics for p, off, _meta, _err in parts}

    async def stop_heartbeating(self) -> None:
        """Vanish without a LeaveGroup, as a crashed process would."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def close(self, leave: bool = True) -> None:
        await self.stop_heartbeating()
        if leave and self.member_id:
            resp = await self.send(LeaveGroupRequest(self.group, self.member_id))
            assert resp.error_code == 0, resp
        await self.client.close()


def _offset_fetch_errors(resp) -> list[int]:
    # v2+ carries a top-level error code beside the per-partition ones.
    return [getattr(resp, "error_code", 0), *(err for _, parts in resp.topics for *_, err in parts)]
