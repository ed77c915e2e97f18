"""An instance answers for its partitions only while the upstream cannot have removed it from
the ownership group: a session timeout after the last heartbeat it sent was answered, a
rebalance timeout while its JoinGroup waits. Removed (UNKNOWN_MEMBER_ID), it gives every
partition up, so one given back later is read again. The upstream here is a script of
answers and the clock a manual one, so the timeouts take no time."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest

from coordinator.replicated.ownership import Instance, Ownership
from protocol.errors import ErrorCode
from tests.support.clock import ManualClock

SESSION_MS = 6_000
REBALANCE_MS = 30_000
ME = Instance(7, "127.0.0.1", 9092)


class ScriptedUpstream:
    """Answers the member's requests in order; each step may move the clock first."""

    def __init__(self, clock: ManualClock):
        self.clock = clock
        self.steps: asyncio.Queue = asyncio.Queue()
        self.sent: list[str] = []

    def answer(self, kind: type, answer: SimpleNamespace, *, after_ms: int = 0) -> None:
        self.steps.put_nowait((kind, answer, after_ms))

    async def call(self, request, response_class, timeout_s=None):
        self.sent.append(type(request).__name__)
        kind, answer, after_ms = await self.steps.get()
        assert isinstance(request, kind), (request, kind)
        self.clock.advance(after_ms)
        return answer


def joined(member_id: str = "m-1", generation: int = 1) -> SimpleNamespace:
    metadata = json.dumps({**ME.to_json(), "owned": []}).encode()
    return SimpleNamespace(error_code=0, member_id=member_id, generation_id=generation, leader=member_id,
                           members=[SimpleNamespace(member_id=member_id, metadata=metadata)])


def synced(member_id: str = "m-1", partitions=range(50)) -> SimpleNamespace:
    owners = {member_id: {**ME.to_json(), "partitions": list(partitions)}}
    return SimpleNamespace(error_code=0, assignment=json.dumps({"owners": owners}).encode())


def code(error: ErrorCode) -> SimpleNamespace:
    return SimpleNamespace(error_code=int(error), member_id="", generation_id=-1, leader="", members=[])


@pytest.fixture
async def member():
    clock = ManualClock(1_000_000)
    upstream = ScriptedUpstream(clock)
    changes: list[frozenset[int]] = []

    async def on_change(partitions: frozenset[int]) -> None:
        changes.append(partitions)

    ownership = Ownership(None, "state.owners", ME, 50, on_change, session_timeout_ms=SESSION_MS,
                          rebalance_timeout_ms=REBALANCE_MS, heartbeat_interval_ms=1, clock=clock.now_ms)
    ownership._call = upstream.call     # the upstream group coordinator's answers
    ownership.start()
    yield ownership, upstream, clock, changes
    ownership._stopping = True
    ownership._task.cancel()
    await asyncio.gather(ownership._task, return_exceptions=True)


async def settle(upstream: ScriptedUpstream) -> None:
    """Until the member waits for an answer the script does not have yet."""
    for _ in range(200):
        await asyncio.sleep(0.002)
        if upstream.steps.empty():
            await asyncio.sleep(0.005)
            return
    raise AssertionError("the member did not take the scripted answers")


async def test_an_instance_serves_until_a_session_timeout_after_its_last_answered_heartbeat(member):
    ownership, upstream, clock, changes = member
    # given a member that joined and was given every partition
    assert not ownership.serving()
    upstream.answer(JoinGroupRequest, joined())
    upstream.answer(SyncGroupRequest, synced())
    upstream.answer(HeartbeatRequest, code(ErrorCode.NONE), after_ms=1_000)
    await settle(upstream)
    assert ownership.owned == frozenset(range(50)) and changes == [frozenset(range(50))]
    assert ownership.history[-1].cause == "this instance joined, 1 in all"
    heartbeat_sent = clock.now_ms() - 1_000     # the script moved the clock while answering
    # when its next heartbeat goes unanswered, it serves until the session timeout counted
    # from when the last answered one was sent, not a moment longer
    clock.advance(heartbeat_sent + SESSION_MS - 1 - clock.now_ms())
    assert ownership.serving()
    clock.advance(1)
    assert not ownership.serving()
    # and partitions stay where they are: nothing was released yet (the upstream may still count it)
    assert changes == [frozenset(range(50))]


async def test_a_member_whose_join_waits_for_the_others_serves_until_the_rebalance_timeout(member):
    ownership, upstream, clock, changes = member
    upstream.answer(JoinGroupRequest, joined())
    upstream.answer(SyncGroupRequest, synced())
    upstream.answer(HeartbeatRequest, code(ErrorCode.REBALANCE_IN_PROGRESS))
    await settle(upstream)
    # given a rebalance began and its JoinGroup is waiting upstream
    assert upstream.sent == ["JoinGroupRequest", "SyncGroupRequest", "HeartbeatRequest",
                             "JoinGroupRequest"]
    join_sent = clock.now_ms()
    # then it serves past the session timeout, while the join may still be answered
    clock.advance(SESSION_MS * 3)
    assert ownership.serving()
    clock.advance(join_sent + REBALANCE_MS - clock.now_ms())
    assert not ownership.serving()


async def test_a_removed_member_gives_every_partition_up_and_claims_none_when_it_joins_again(member):
    ownership, upstream, clock, changes = member
    upstream.answer(JoinGroupRequest, joined())
    upstream.answer(SyncGroupRequest, synced())
    await settle(upstream)
    # given it slept past its session (SIGSTOP, a long pause) and the upstream removed it
    clock.advance(SESSION_MS * 2)
    assert not ownership.serving()
    upstream.answer(HeartbeatRequest, code(ErrorCode.UNKNOWN_MEMBER_ID))
    await settle(upstream)
    # then it released every partition: another instance may have taken and written them meanwhile
    assert changes == [frozenset(range(50)), frozenset()]
    assert ownership.owned == frozenset() and not ownership.serving()
    assert ownership.history[-1].lost == frozenset(range(50))
    assert ownership.history[-1].cause == "this instance removed (Heartbeat: UNKNOWN_MEMBER_ID)"
    # and it joins again as a new member that claims nothing, without stretching a lapsed lease
    assert upstream.sent[-1] == "JoinGroupRequest" and not ownership.serving()
    # when the new generation gives it partitions back, they are taken again (read anew)
    upstream.answer(JoinGroupRequest, joined("m-2", 3))
    upstream.answer(SyncGroupRequest, synced("m-2", range(10)))
    await settle(upstream)
    assert changes[-1] == frozenset(range(10)) and ownership.serving()
