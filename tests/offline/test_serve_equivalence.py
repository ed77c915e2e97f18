"""A data dir written by a real `kgc serve` with real clients: compact it, and kgc started
on the compacted copy answers the same committed offsets."""

from __future__ import annotations

import time

import pytest

from coordinator.offline.job import Options
from coordinator.offline.runner import audit, compact
from coordinator.offline.state import replay_state
from tests.support.aio_group import PARTITIONS, TOPIC, settled
from tests.support.aio_member import AioMember
from tests.support.kgc import kgc_process
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FAST = ("--initial-rebalance-delay-ms", "0", "--min-session-timeout-ms", "500")


async def test_compacted_serve_data_dir_loads_into_the_same_state(tmp_path):
    data, compacted = tmp_path / "data", tmp_path / "compacted"
    committed: dict[int, int] = {}
    with kgc_process("--data-dir", str(data), *FAST, log_path=str(tmp_path / "kgc.log")) as kgc:
        members = [AioMember(kgc.bootstrap, "g-serve", TOPIC, PARTITIONS, client_id=f"serve-{i}",
                             session_timeout_ms=1000) for i in range(2)]
        for m in members:
            await m.start()
        await wait_until(lambda: settled(members), what="2 members to settle")
        for round_ in range(5):
            for m in members:
                offsets = {p: 100 * round_ + p for p in m.assignment.partitions}
                assert await m.commit(offsets) == [0] * len(offsets)
                committed.update(offsets)
        leaver = AioMember(kgc.bootstrap, "g-brief", TOPIC, PARTITIONS, client_id="brief", session_timeout_ms=1000)
        await leaver.start()
        await wait_until(lambda: leaver.assignment is not None, what="the brief member to join")
        assert await leaver.commit({0: 7}) == [0]
        await leaver.close(leave=True)
        for m in members:
            await m.close(leave=True)

    before = replay_state(data)
    assert {(t, p): v.offset for (g, t, p), v in before.offsets.items() if g == "g-serve"} == \
        {(TOPIC, p): o for p, o in committed.items()}
    assert {"g-serve", "g-brief"} <= set(before.groups)

    now_ms = time.time_ns() // 1_000_000
    run = audit(data, tmp_path / "report", Options(now_ms=now_ms))
    assert [f for r in run.results for f in r.findings] == []

    compact(data, compacted, Options(now_ms=now_ms))
    after = replay_state(compacted)
    assert (after.offsets, after.groups, after.next_offsets) == (before.offsets, before.groups, before.next_offsets)

    with kgc_process("--data-dir", str(compacted), *FAST, log_path=str(tmp_path / "kgc2.log")) as kgc:
        reader = AioMember(kgc.bootstrap, "g-serve", TOPIC, PARTITIONS, client_id="reader")
        await reader.start()
        try:
            assert await reader.fetch(list(range(PARTITIONS))) == committed
        finally:
            await reader.close(leave=False)
