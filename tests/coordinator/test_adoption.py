"""Cut-over on first use, through the real service, runtime and shard over a memory log.

The upstream coordinator is a scripted `GroupSource` (the real one, against Tansu, is in
tests/e2e/test_adoption.py): what matters here is what kgc writes and answers for each
upstream answer, how often it asks, and that a known group never asks.
"""

from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from coordinator import metrics
from coordinator.group.adopt import AdoptedOffset, UpstreamGroup
from coordinator.partitioning import partition_for
from coordinator.records import adoption_of
from coordinator.service.adoption import Adoption
from coordinator.service.group_coordinator import GroupCoordinatorService
from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode
from storage.memory_store import MemoryLogStore
from tests.support.clock import ManualClock
from tests.support.service_harness import CONFIG, NODE, Coordinator, fetch_v0, fetch_v8
from tests.support.waiting import wait_until

ORDERS = (AdoptedOffset("orders", 0, 42, 3, "m0"), AdoptedOffset("orders", 1, 7, -1, ""))


class ScriptedUpstream:
    def __init__(self):
        self.answers: dict[str, UpstreamGroup | Exception] = {}
        self.asked: list[str] = []
        self.gate: asyncio.Event | None = None

    async def snapshot(self, group_id: str) -> UpstreamGroup:
        self.asked.append(group_id)
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.get(group_id, UpstreamGroup(group_id, "Dead", "", (), ()))
        if isinstance(answer, Exception):
            raise answer
        return answer


DEFAULT_WAIT_MS = 45_000


async def adopting_coordinator(store: MemoryLogStore, upstream: ScriptedUpstream) -> Coordinator:
    coordinator = Coordinator(store)
    coordinator.clock = ManualClock(1_000_000)
    coordinator.adoption = Adoption(coordinator.runtime, upstream, clock=coordinator.clock.now_ms,
                                    default_wait_ms=DEFAULT_WAIT_MS)
    coordinator.service = GroupCoordinatorService(coordinator.runtime, NODE, coordinator.adoption)
    await coordinator.start()
    return coordinator


async def stop(coordinator: Coordinator) -> None:
    coordinator.adoption.close()
    await coordinator.runtime.close()


@pytest.fixture
async def adopting():
    upstream = ScriptedUpstream()
    coordinator = await adopting_coordinator(MemoryLogStore(num_partitions=CONFIG.num_partitions), upstream)
    yield coordinator, upstream
    await stop(coordinator)


def waiting_upstream_members(group: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("kgc_adoption_waiting_upstream_members", {"group": group})


def offsets_of(response) -> dict[int, int]:
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


async def test_first_use_adopts_offsets_with_adoption_headers_and_later_requests_never_ask(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "consumer", (), ORDERS)
    first = await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))
    assert first.error_code == ErrorCode.NONE and offsets_of(first) == {0: 42, 1: 7}
    for _ in range(3):
        assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}
    await kgc.member("g")  # JoinGroup on the adopted (Empty, "consumer") group forms it
    assert upstream.asked == ["g"]
    stored = [r for batch in kgc.store.read(partition_for("g")) for r in batch.records]
    assert len(stored) >= 3 and all(adoption_of(r.headers)[0] == "upstream" for r in stored[:3])


async def test_a_group_kgc_already_has_is_never_asked_about(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "", (), ORDERS)
    kgc.service._adoption.settled.discard("g")
    await kgc.runtime.write(partition_for("g"), lambda shard, handle: shard.adopt("g", "", ORDERS[:1], "test"))
    assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: -1}
    assert upstream.asked == []


async def test_live_upstream_members_make_kgc_members_wait_then_the_final_offsets_are_adopted(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Stable", "consumer", ("m-1", "m-2"), ORDERS[:1])
    joined = await kgc.join("g")
    assert joined.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert waiting_upstream_members("g") == 2
    assert (await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "consumer", (), ORDERS)
    member_id, _ = await kgc.member("g")
    assert member_id
    assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}
    assert waiting_upstream_members("g") is None


async def test_an_unreachable_upstream_is_a_retriable_error_never_an_empty_adoption(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = ConnectionError("refused")
    assert (await kgc.join("g")).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (await kgc.call(ApiKey.OffsetFetch, 8, fetch_v8("g"))).groups[0].error_code == \
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert list(kgc.store.read(partition_for("g"))) == []
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "", (), ORDERS)
    assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}
    assert upstream.asked == ["g", "g", "g"]


async def test_concurrent_first_uses_share_one_upstream_snapshot(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "", (), ORDERS)
    upstream.gate = asyncio.Event()
    pending = [kgc.send(ApiKey.OffsetFetch, 7, fetch_v0("g")) for _ in range(5)]
    await asyncio.sleep(0.01)
    upstream.gate.set()
    answers = await asyncio.gather(*pending)
    assert all(offsets_of(a) == {0: 42, 1: 7} for a in answers)
    assert upstream.asked == ["g"]


@pytest.mark.parametrize("version", [3, 4])
async def test_a_members_find_coordinator_starts_adoption_and_its_join_group_shares_it(adopting, version):
    # given a group kgc has never seen, whose upstream answer is held back
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "consumer", (), ORDERS)
    upstream.gate = asyncio.Event()
    # when a member looks its coordinator up, then joins before the upstream has answered
    request = FindCoordinatorRequest(key="g", key_type=0) if version < 4 else \
        FindCoordinatorRequest(key_type=0, coordinator_keys=["g"])
    await kgc.call(ApiKey.FindCoordinator, version, request)
    await wait_until(lambda: upstream.asked == ["g"], what="the upstream asked at FindCoordinator")
    joining = asyncio.ensure_future(kgc.member("g"))
    upstream.gate.set()
    # then the join waits for that one question, and the group starts from what was adopted
    member_id, _ = await joining
    assert member_id and upstream.asked == ["g"]
    assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}


async def test_an_admin_tools_batch_find_coordinator_asks_the_upstream_nothing(adopting):
    kgc, upstream = adopting
    await kgc.call(ApiKey.FindCoordinator, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]))
    await asyncio.sleep(0.05)
    assert upstream.asked == []


async def test_a_find_coordinator_that_meets_live_upstream_members_keeps_the_group_waiting_the_default_only(adopting):
    # given a group still live upstream, looked up by a member that then gives up
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Stable", "consumer", ("m-1",), ())
    await kgc.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key="g", key_type=0))
    await wait_until(lambda: waiting_upstream_members("g") == 1, what="the group waiting for its upstream member")
    # then kgc stops waiting once nobody asked within the default wait, as for any request
    kgc.clock.advance(DEFAULT_WAIT_MS)
    kgc.adoption.expire_waiting()
    assert waiting_upstream_members("g") is None


async def test_a_group_unknown_upstream_starts_empty_and_writes_nothing(adopting):
    kgc, upstream = adopting
    fetched = await kgc.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id="new", require_stable=False,
                                                                      topics=None))
    assert fetched.error_code == ErrorCode.NONE and fetched.topics == []
    assert list(kgc.store.read(partition_for("new"))) == []
    await kgc.member("new")
    assert upstream.asked == ["new"]


async def test_a_kip848_first_heartbeat_adopts_and_a_known_consumer_group_is_never_asked_about(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "consumer", (), ORDERS)
    joined = await kgc.call(ApiKey.ConsumerGroupHeartbeat, 0, ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m-1", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["orders"], server_assignor=None, topic_partitions=[]))
    assert joined.error_code == ErrorCode.NONE and joined.member_epoch >= 1
    assert upstream.asked == ["g"]
    # The adopted (Empty, classic) group became a consumer group and keeps its offsets.
    assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}
    kgc.service._adoption.settled.clear()   # as after a restart: the shard's groups decide
    await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))
    assert upstream.asked == ["g"]


async def test_a_group_stops_waiting_once_its_kgc_members_stop_asking_within_their_session_timeout(adopting, caplog):
    """Members refused while the group lives upstream are members of nothing on kgc: they
    neither leave nor expire there. The gauge and the waiting state go once none asked
    again within its session timeout (the JoinGroup's 10 s), not only at adoption."""
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Stable", "consumer", ("m-1",), ())
    assert (await kgc.join("g")).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    kgc.clock.advance(9_999)
    kgc.adoption.expire_waiting()
    assert waiting_upstream_members("g") == 1
    assert (await kgc.join("g")).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS   # asked again: 10 s more
    kgc.clock.advance(9_999)
    kgc.adoption.expire_waiting()
    assert waiting_upstream_members("g") == 1
    with caplog.at_level("INFO", logger="coordinator.service.adoption"):
        kgc.clock.advance(1)
        kgc.adoption.expire_waiting()
    assert waiting_upstream_members("g") is None
    assert "[group=g] no member waits on kgc any more" in caplog.text
    # A member that comes back waits again, and says so again.
    with caplog.at_level("INFO", logger="coordinator.service.adoption"):
        assert (await kgc.join("g")).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert waiting_upstream_members("g") == 1
    assert caplog.text.count("[group=g] waits for 1 upstream member(s)") == 1


async def test_requests_that_name_no_session_timeout_keep_a_group_waiting_for_the_default(adopting):
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Stable", "consumer", ("m-1", "m-2"), ())
    assert (await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))).error_code == \
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    kgc.clock.advance(DEFAULT_WAIT_MS - 1)
    kgc.adoption.expire_waiting()
    assert waiting_upstream_members("g") == 2
    kgc.clock.advance(1)
    kgc.adoption.expire_waiting()
    assert waiting_upstream_members("g") is None


async def test_the_loop_timer_clears_the_gauge_of_a_group_nobody_waits_for_any_more(adopting):
    """The glue: expiry runs by itself at the earliest deadline (a 1 ms session here)."""
    kgc, upstream = adopting
    upstream.answers["g"] = UpstreamGroup("g", "Stable", "consumer", ("m-1",), ())
    joined = await kgc.call(ApiKey.JoinGroup, 5, JoinGroupRequest(
        group_id="g", session_timeout_ms=1, rebalance_timeout_ms=1, member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert joined.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await asyncio.sleep(0.05)
    assert waiting_upstream_members("g") == 1   # kgc's clock has not moved
    kgc.clock.advance(1)
    await wait_until(lambda: waiting_upstream_members("g") is None, what="the wait for upstream members ended")


async def test_a_group_adopted_then_deleted_on_kgc_is_not_adopted_again_after_a_restart():
    """kgc's AdoptedGroup record outlives the group: after kgc moved the group's offsets on
    and the group was deleted, a restart must not bring the upstream's older offsets back."""
    store, upstream = MemoryLogStore(num_partitions=CONFIG.num_partitions), ScriptedUpstream()
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "consumer", (), ORDERS)
    kgc = await adopting_coordinator(store, upstream)
    try:
        assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}
        assert (await kgc.commit("g", 50)).topics[0].partitions[0].error_code == ErrorCode.NONE
        deleted = await kgc.call(ApiKey.DeleteGroups, 2, DeleteGroupsRequest(groups_names=["g"]))
        assert deleted.results[0].error_code == ErrorCode.NONE
    finally:
        await stop(kgc)
    restarted = await adopting_coordinator(store, upstream)
    try:
        fetched = await restarted.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))
        assert fetched.error_code == ErrorCode.NONE and offsets_of(fetched) == {0: -1, 1: -1}
        assert upstream.asked == ["g"]
    finally:
        await stop(restarted)


async def test_a_group_found_unknown_upstream_is_asked_about_again_after_a_restart_as_kgc_wrote_nothing_for_it():
    """Nothing to persist for it: kgc has no offsets of its own that the upstream's could
    be older than, so asking again (and adopting what the upstream has by then) is right."""
    store, upstream = MemoryLogStore(num_partitions=CONFIG.num_partitions), ScriptedUpstream()
    kgc = await adopting_coordinator(store, upstream)
    try:
        assert offsets_of(await kgc.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: -1, 1: -1}
    finally:
        await stop(kgc)
    assert list(store.read(partition_for("g"))) == []
    upstream.answers["g"] = UpstreamGroup("g", "Empty", "", (), ORDERS)
    restarted = await adopting_coordinator(store, upstream)
    try:
        assert offsets_of(await restarted.call(ApiKey.OffsetFetch, 7, fetch_v0("g"))) == {0: 42, 1: 7}
        assert upstream.asked == ["g", "g"]
    finally:
        await stop(restarted)
