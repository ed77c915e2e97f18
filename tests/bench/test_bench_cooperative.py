"""The bench's cooperative-sticky members against a running kgc: a member joining costs
two rebalances (revoke, then assign) and moves only the partitions it takes; a member
leaving costs one. Members send their real consumer-protocol bytes over kgc's socket."""

from __future__ import annotations

import asyncio

from coordinator.bench.cooperative import CooperativeMember, sticky_target
from coordinator.bench.member import Phase, Swarm
from coordinator.bench.wire import BenchConnection
from tests.support.kgc import running_kgc

PARTITIONS = 12
TIMEOUT_S = 20


def test_the_sticky_target_keeps_owners_and_balances_within_one():
    owned = {"a": [0, 1, 2, 3, 4, 5], "b": [6, 7, 8, 9, 10, 11], "c": []}
    target = sticky_target(owned, PARTITIONS)
    assert sorted(p for parts in target.values() for p in parts) == list(range(PARTITIONS))
    assert [len(target[m]) for m in "abc"] == [4, 4, 4]
    assert set(target["a"]) <= set(owned["a"]) and set(target["b"]) <= set(owned["b"])


def _phase(members: list[CooperativeMember], min_generation: int = 0) -> Phase:
    phase = Phase(members, min_generation=min_generation)
    for m in members:
        m.phase = phase
    return phase


async def test_a_join_takes_two_rebalances_and_a_leave_one():
    async with running_kgc() as app:
        everyone = [CooperativeMember(await BenchConnection.open("127.0.0.1", app.port), "coop",
                                      session_timeout_ms=6_000, rebalance_timeout_ms=6_000, heartbeat_interval_ms=20,
                                      topic="t", partitions=PARTITIONS) for _ in range(4)]
        swarm = Swarm(everyone[:3])
        try:
            first = _phase(swarm.members)
            swarm.start()
            await swarm.until([first], TIMEOUT_S)
            before = {m: list(m.owned) for m in swarm.members}
            assert sorted(len(parts) for parts in before.values()) == [4, 4, 4]

            newcomer = everyone[3]
            grown = _phase(everyone, min_generation=first.generation + 1)
            swarm.members.append(newcomer)
            swarm.tasks[newcomer] = asyncio.create_task(newcomer.run())
            await swarm.until([grown], TIMEOUT_S)
            # Revoke, then assign: two generations; the others kept all but what the newcomer took.
            assert grown.generation == first.generation + 2
            assert sorted(p for m in everyone for p in m.owned) == list(range(PARTITIONS))
            assert all(set(m.owned) <= set(before[m]) and len(m.owned) == 3 for m in everyone[:3])

            shrunk, _left_ns = await swarm.one_leaves(grown.generation + 1, TIMEOUT_S)
            assert shrunk.generation == grown.generation + 1
            rest = [m for m in everyone if m in shrunk.expected]
            assert sorted(p for m in rest for p in m.owned) == list(range(PARTITIONS))
        finally:
            await swarm.close()
