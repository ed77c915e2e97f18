"""Three aiokafka-driven members form a group on kgc, rebalance on leave and on timeout,
commit and fetch offsets — all over real sockets."""

from __future__ import annotations

import pytest

from tests.support.aio_group import PARTITIONS, TOPIC, settled
from tests.support.aio_member import AioMember
from tests.support.kgc import running_kgc
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def test_three_members_share_partitions_rebalance_and_commit():
    async with running_kgc() as app:
        bootstrap = f"127.0.0.1:{app.port}"
        members = [AioMember(bootstrap, "g-aio", TOPIC, PARTITIONS, client_id=f"aio-{i}",
                             session_timeout_ms=1000) for i in range(3)]
        for m in members:
            await m.start()
        await wait_until(lambda: settled(members), what="3 members to settle")
        assert all(len(m.assignment.partitions) == 2 for m in members)

        first = members[0]
        errors = await first.commit({p: 100 + p for p in first.assignment.partitions})
        assert errors == [0] * len(first.assignment.partitions)
        fetched = await members[1].fetch(list(range(PARTITIONS)))
        for p in range(PARTITIONS):
            assert fetched[p] == (100 + p if p in first.assignment.partitions else -1)

        leaver = members.pop()
        generation = members[0].assignment.generation
        await leaver.close(leave=True)
        await wait_until(lambda: settled(members) and members[0].assignment.generation > generation,
                         what="2 members to settle after a leave")

        crashed = members.pop()
        generation = members[0].assignment.generation
        await crashed.stop_heartbeating()
        await wait_until(lambda: settled(members) and members[0].assignment.generation > generation,
                         what="the session timeout to remove the silent member")
        assert members[0].assignment.partitions == list(range(PARTITIONS))

        stale = await crashed.commit({0: 1})
        assert stale == [25]  # UNKNOWN_MEMBER_ID: the expired member is gone
        await crashed.client.close()
        await members[0].close()
