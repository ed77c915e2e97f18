"""The coordinator service over the real runtime, the real group shard and a memory log.

Requests go through the wire codecs both ways: each request is encoded at its version and
decoded as the connection layer decodes it, and each answer is encoded at the request's
version and decoded again, so the assertions see what a client would read.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetDeleteRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from coordinator import metrics
from coordinator.group.context import RequestContext
from coordinator.group.shard import GroupShard
from coordinator.partitioning import partition_for
from coordinator.runtime.api import PartitionLoading, PartitionNotActive, RuntimeClosed
from coordinator.runtime.partition_state import PartitionState
from coordinator.service.deleted_topics import DeletedTopics
from coordinator.service.group_coordinator import SLICE, error_code_for
from protocol.errors import ApiError, ErrorCode
from storage.api import LogRecord, StorageError
from storage.memory_store import MemoryLogStore
from tests.support.service_harness import CONFIG, Coordinator, fetch_v0, fetch_v8, handled


def group_on(partition: int, prefix: str = "group") -> str:
    return next(g for i in itertools.count() if partition_for(g := f"{prefix}-{i}") == partition)


@pytest.fixture
async def kgc():
    coordinator = Coordinator(MemoryLogStore(num_partitions=CONFIG.num_partitions))
    await coordinator.start()
    yield coordinator
    await coordinator.runtime.close()


class GatedRecoveryStore(MemoryLogStore):
    """A memory log whose recovery waits for the test: a partition reloading after a failed
    write stays LOADING until `recovered.set()`."""

    def __init__(self, num_partitions: int):
        super().__init__(num_partitions=num_partitions)
        self.recovered = asyncio.Event()

    async def recover(self, partition: int) -> int:
        await self.recovered.wait()
        return await super().recover(partition)


LOADING_PARTITIONS = (4, 5)


@pytest.fixture
async def loading():
    """Partitions 4 and 5 reloading after a failed write; the others serve."""
    coordinator = Coordinator(GatedRecoveryStore(CONFIG.num_partitions))
    await coordinator.start()
    for partition in LOADING_PARTITIONS:
        coordinator.store.fail(partition, OSError("I/O error"))
        failed = await coordinator.commit(group_on(partition, "victim"), 1)
        assert failed.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    await wait_for_states(coordinator, LOADING_PARTITIONS, PartitionState.LOADING)
    yield coordinator
    coordinator.store.recovered.set()
    await coordinator.runtime.close()


async def wait_for_states(kgc: Coordinator, partitions, state: PartitionState) -> None:
    for _ in range(100):
        if all(kgc.runtime.partition_state(p) is state for p in partitions):
            return
        await asyncio.sleep(0)
    raise AssertionError(f"partitions {partitions} did not reach {state}")


# ---- FindCoordinator -------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_find_coordinator_names_the_kgc_node_for_a_group(kgc, version):
    answer = await kgc.call(ApiKey.FindCoordinator, version, FindCoordinatorRequest(key="any-group", key_type=0))
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, 7, "kgc.test", 19092)


@pytest.mark.parametrize("version", [4, 6])
async def test_find_coordinator_answers_every_key_of_a_batch(kgc, version):
    answer = await kgc.call(ApiKey.FindCoordinator, version,
                            FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", "c"]))
    assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in answer.coordinators] == [
        (key, 0, 7, "kgc.test", 19092) for key in "abc"]


async def test_find_coordinator_leaves_transactions_upstream_and_refuses_share_keys(kgc):
    txn_v3 = await kgc.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key="txn", key_type=1))
    assert (txn_v3.error_code, txn_v3.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    txn_v4 = await kgc.call(ApiKey.FindCoordinator, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["t1", "t2"]))
    assert [(c.key, c.error_code) for c in txn_v4.coordinators] == [("t1", 15), ("t2", 15)]
    share = await kgc.call(ApiKey.FindCoordinator, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=["s:t:0"]))
    assert [c.error_code for c in share.coordinators] == [ErrorCode.INVALID_REQUEST]


async def test_find_coordinator_answers_while_partitions_load(loading):
    answer = await loading.call(ApiKey.FindCoordinator, 2, FindCoordinatorRequest(key="g", key_type=0))
    assert (answer.error_code, answer.node_id) == (0, 7)


# ---- a group through its life ----------------------------------------------------------


async def test_a_member_joins_syncs_heartbeats_commits_and_leaves(kgc):
    group = group_on(11)
    member_id, generation = await kgc.member(group)

    beat = await kgc.call(ApiKey.Heartbeat, 3, HeartbeatRequest(group_id=group, generation_id=generation,
                                                                 member_id=member_id, group_instance_id=None))
    assert beat.error_code == ErrorCode.NONE

    committed = await kgc.commit(group, 42, member_id=member_id, generation=generation)
    assert [(p.partition_index, p.error_code) for t in committed.topics for p in t.partitions] == [(0, 0)]

    v5 = await kgc.call(ApiKey.OffsetFetch, 5, fetch_v0(group))
    assert v5.error_code == 0
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for t in v5.topics for p in t.partitions] == [(0, 42, "meta", 0), (1, -1, "", 0)]

    described = await kgc.call(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=[group],
                                                                               include_authorized_operations=False))
    [g] = described.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.member_assignment) for m in g.members] == [(member_id, "client", b"assigned")]

    left = await kgc.call(ApiKey.LeaveGroup, 3, LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=member_id, group_instance_id=None),
        LeaveGroupRequest.MemberIdentity(member_id="stranger", group_instance_id=None)]))
    assert left.error_code == 0
    assert [(m.member_id, m.error_code) for m in left.members] == [(member_id, 0), ("stranger", 25)]


async def test_offset_delete_and_delete_groups_remove_a_simple_group(kgc):
    group = group_on(5)
    await kgc.commit(group, 7)
    deleted = await kgc.call(ApiKey.OffsetDelete, 0, OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name="orders", partitions=[OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                partition_index=0)])]))
    assert deleted.error_code == 0
    assert [p.error_code for t in deleted.topics for p in t.partitions] == [0]
    fetched = await kgc.call(ApiKey.OffsetFetch, 3, fetch_v0(group))
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [-1, -1]
    removed = await kgc.call(ApiKey.DeleteGroups, 2, DeleteGroupsRequest(groups_names=[group]))
    assert [(r.group_id, r.error_code) for r in removed.results] == [(group, 0)]


# ---- multi-group requests --------------------------------------------------------------


async def test_multi_group_requests_are_split_by_partition_and_merged_in_request_order(kgc):
    # given simple groups on three partitions and a group with a live member
    g3, g17, g42 = group_on(3), group_on(17), group_on(42)
    for offset, group in enumerate((g3, g17, g42), start=100):
        await kgc.commit(group, offset)
    busy = group_on(17, "busy")
    await kgc.member(busy)
    unknown = group_on(3, "unknown")

    fetched = await kgc.call(ApiKey.OffsetFetch, 8, fetch_v8(g42, unknown, g3, g17))
    assert [(g.group_id, g.error_code, [p.committed_offset for t in g.topics for p in t.partitions])
            for g in fetched.groups] == [(g42, 0, [102]), (unknown, 0, [-1]), (g3, 0, [100]), (g17, 0, [101])]

    described = await kgc.call(ApiKey.DescribeGroups, 6, DescribeGroupsRequest(
        groups=[busy, unknown, g42], include_authorized_operations=False))
    assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [
        (busy, 0, "Stable"), (unknown, ErrorCode.GROUP_ID_NOT_FOUND, "Dead"), (g42, 0, "Empty")]

    deleted = await kgc.call(ApiKey.DeleteGroups, 1, DeleteGroupsRequest(groups_names=[g17, unknown, busy, g3]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (g17, 0), (unknown, ErrorCode.GROUP_ID_NOT_FOUND), (busy, ErrorCode.NON_EMPTY_GROUP), (g3, 0)]


async def test_a_failed_partition_answers_not_coordinator_for_its_groups_only():
    # given a partition whose log cannot be loaded
    broken, healthy = group_on(9), group_on(10)
    store = MemoryLogStore(num_partitions=CONFIG.num_partitions)
    await store.append(9, [LogRecord(b"\x00\x01\x00", b"")], 0).durable
    kgc = Coordinator(store)
    await kgc.start()
    assert kgc.runtime.partition_state(9) is PartitionState.FAILED
    try:
        await kgc.commit(healthy, 5)
        fetched = await kgc.call(ApiKey.OffsetFetch, 9, fetch_v8(broken, healthy))
        assert [(g.group_id, g.error_code) for g in fetched.groups] == [
            (broken, ErrorCode.NOT_COORDINATOR), (healthy, 0)]
        # ListGroups skips a partition it does not coordinate, as Kafka does
        listed = await kgc.call(ApiKey.ListGroups, 3, ListGroupsRequest())
        assert (listed.error_code, [g.group_id for g in listed.groups]) == (0, [healthy])
        assert not kgc.runtime.all_loaded
    finally:
        await kgc.runtime.close()


async def test_a_fetch_of_one_group_answers_as_that_group_among_several():
    """What a consumer sends (OffsetFetch v8+ naming its own group) takes one read op, not
    the several-group path: its answer is the entry the group gets among others, refused
    ones included."""
    broken, healthy, unknown = group_on(9), group_on(10), group_on(10, "unknown")
    store = MemoryLogStore(num_partitions=CONFIG.num_partitions)
    await store.append(9, [LogRecord(b"\x00\x01\x00", b"")], 0).durable
    kgc = Coordinator(store)
    await kgc.start()

    def entries(response):
        return [(g.group_id, g.error_code, [(t.name, [(p.partition_index, p.committed_offset, p.error_code)
                                                      for p in t.partitions]) for t in g.topics])
                for g in response.groups]
    try:
        await kgc.commit(healthy, 5)
        for group in (broken, healthy, unknown, "", "x" * 40_000):
            for version in (8, 9):
                alone = await kgc.call(ApiKey.OffsetFetch, version, fetch_v8(group))
                among = await kgc.call(ApiKey.OffsetFetch, version, fetch_v8(group, healthy))
                assert entries(alone) == entries(among)[:1], (group, version)
        assert entries(await kgc.call(ApiKey.OffsetFetch, 9, fetch_v8(healthy)))[0][1:] == (0, [("orders", [(0, 5, 0)])])
    finally:
        await kgc.runtime.close()


async def test_list_groups_filters_by_state_from_v4_and_by_type_from_v5(kgc):
    stable, empty = group_on(1, "stable"), group_on(2, "empty")
    await kgc.member(stable)
    await kgc.commit(empty, 1)

    everything = await kgc.call(ApiKey.ListGroups, 0, ListGroupsRequest())
    assert sorted((g.group_id, g.protocol_type) for g in everything.groups) == [(empty, ""), (stable, "consumer")]
    only_stable = await kgc.call(ApiKey.ListGroups, 4, ListGroupsRequest(states_filter=["stable"]))
    assert [(g.group_id, g.group_state) for g in only_stable.groups] == [(stable, "Stable")]
    classic = await kgc.call(ApiKey.ListGroups, 5, ListGroupsRequest(states_filter=[], types_filter=["classic"]))
    assert sorted((g.group_id, g.group_type) for g in classic.groups) == [(empty, "classic"), (stable, "classic")]
    consumer = await kgc.call(ApiKey.ListGroups, 5, ListGroupsRequest(states_filter=[], types_filter=["consumer"]))
    assert consumer.groups == []


# ---- loading partitions ----------------------------------------------------------------


async def test_offset_fetch_puts_load_in_progress_where_each_version_carries_errors(loading):
    group = group_on(4)
    v1 = await loading.call(ApiKey.OffsetFetch, 1, fetch_v0(group))
    assert [(p.committed_offset, p.error_code) for t in v1.topics for p in t.partitions] == [(-1, 14), (-1, 14)]
    v7 = await loading.call(ApiKey.OffsetFetch, 7, fetch_v0(group))
    assert (v7.error_code, v7.topics) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])
    v8 = await loading.call(ApiKey.OffsetFetch, 8, fetch_v8(group, group_on(5)))
    assert [g.error_code for g in v8.groups] == [14, 14]


async def test_a_loading_partition_answers_load_in_progress_except_to_heartbeats(loading):
    group = group_on(4)
    beat = await loading.call(ApiKey.Heartbeat, 2, HeartbeatRequest(group_id=group, generation_id=1, member_id="m"))
    assert beat.error_code == ErrorCode.NONE
    joined = await loading.join(group)
    assert (joined.error_code, joined.generation_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1)
    committed = await loading.commit(group, 1, version=2)
    assert [p.error_code for t in committed.topics for p in t.partitions] == [14]
    listed = await loading.call(ApiKey.ListGroups, 4, ListGroupsRequest(states_filter=[]))
    assert (listed.error_code, listed.groups) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])
    described = await loading.call(ApiKey.DescribeGroups, 0, DescribeGroupsRequest(
        groups=[group, group_on(6), group_on(5)]))
    assert [g.error_code for g in described.groups] == [14, 0, 14]
    # and once reloaded, the same partition serves
    loading.store.recovered.set()
    await wait_for_states(loading, LOADING_PARTITIONS, PartitionState.ACTIVE)
    assert (await loading.join(group)).error_code == ErrorCode.MEMBER_ID_REQUIRED


# ---- failures and shutdown -------------------------------------------------------------


async def test_a_failed_write_answers_parked_joins_not_coordinator_and_the_partition_reloads():
    store = MemoryLogStore(num_partitions=CONFIG.num_partitions, manual_commit=True)
    kgc = Coordinator(store)
    await kgc.start()
    try:
        # given a join parked while the new group's first record is not yet durable
        group = group_on(23)
        first = kgc.send(ApiKey.JoinGroup, 3, JoinGroupRequest(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not first.done()
        # when that write fails
        store.fail(23, StorageError("disk full"))
        # then the parked join is told to find its coordinator again
        answer = await first
        assert answer.error_code == ErrorCode.NOT_COORDINATOR
        # and the partition comes back from the durable log, without the group
        await wait_for_states(kgc, [23], PartitionState.ACTIVE)
        described = kgc.send(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(
            groups=[group], include_authorized_operations=False))
        assert [(g.error_code, g.group_state) for g in (await described).groups] == [(0, "Dead")]
    finally:
        await kgc.runtime.close()


async def test_a_closed_coordinator_answers_coordinator_not_available(kgc):
    await kgc.runtime.close()
    beat = await kgc.call(ApiKey.Heartbeat, 0, HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
    assert beat.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    deleted = await kgc.call(ApiKey.DeleteGroups, 0, DeleteGroupsRequest(groups_names=["a", "b"]))
    assert [r.error_code for r in deleted.results] == [15, 15]


async def test_a_null_group_id_is_refused_before_routing(kgc):
    # The wire decoder refuses nulls in these fields; a caller building requests by hand may not.
    ctx = RequestContext(0)
    beat = await handled(kgc.service, ctx, ApiKey.Heartbeat, HeartbeatRequest(version=0, group_id=None,
                                                                            generation_id=1, member_id="m"))
    assert beat.error_code == ErrorCode.INVALID_GROUP_ID
    described = await handled(kgc.service, ctx, ApiKey.DescribeGroups, DescribeGroupsRequest(version=0,
                                                                                           groups=[None, "g"]))
    assert [(g.group_id, g.error_code) for g in described.groups] == [(None, 24), ("g", 0)]
    deleted = await handled(kgc.service, ctx, ApiKey.DeleteGroups, DeleteGroupsRequest(version=0,
                                                                                       groups_names=[None]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(None, 24)]
    fetched = await handled(kgc.service, RequestContext(8), ApiKey.OffsetFetch, fetch_v8(None, "g"))
    assert [(g.group_id, g.error_code) for g in fetched.groups] == [(None, 24), ("g", 0)]


@pytest.mark.parametrize(("exc", "api_key", "code"), [
    (PartitionLoading("p"), ApiKey.JoinGroup, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    (PartitionLoading("p"), ApiKey.Heartbeat, ErrorCode.NONE),
    (PartitionNotActive("p"), ApiKey.SyncGroup, ErrorCode.NOT_COORDINATOR),
    (RuntimeClosed("p"), ApiKey.OffsetCommit, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ApiError(ErrorCode.GROUP_MAX_SIZE_REACHED), ApiKey.JoinGroup, ErrorCode.GROUP_MAX_SIZE_REACHED),
])
def test_internal_exceptions_map_to_kafka_error_codes(exc, api_key, code):
    assert error_code_for(api_key, exc) is code


def test_an_unexpected_exception_is_an_unknown_server_error_and_is_logged(caplog):
    with caplog.at_level(logging.ERROR, logger="coordinator.service"):
        code = error_code_for(ApiKey.OffsetFetch, KeyError("bug"))
    assert code is ErrorCode.UNKNOWN_SERVER_ERROR
    [record] = caplog.records
    assert record.exc_info is not None and "OffsetFetch" in record.getMessage()


async def test_a_request_naming_groups_on_every_partition_does_a_slice_of_work_per_loop_turn(kgc, monkeypatch):
    # Each partition's executor answers its share of the groups in slices; all partitions'
    # slices run in the same loop turn, so together they stay within one `SLICE`.
    described = [0]
    describe = GroupShard.describe_group

    def counting(shard, ctx, group_id):
        described[0] += 1
        return describe(shard, ctx, group_id)

    monkeypatch.setattr(GroupShard, "describe_group", counting)
    names = [f"absent-{i}" for i in range(10_000)]
    answer = kgc.send(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=names, include_authorized_operations=False))
    per_turn, last = [], 0
    while not answer.done():
        await asyncio.sleep(0)
        per_turn.append(described[0] - last)
        last = described[0]
    assert [g.group_id for g in (await answer).groups] == names
    assert described[0] == len(names) and max(per_turn) <= SLICE


# ---- offsets of deleted topics ---------------------------------------------------------

DELETED = {"orders": uuid.UUID("7d6e7b0c-1f3a-4b2c-9d8e-0a1b2c3d4e5f")}


async def test_deleted_topics_wait_for_a_loading_partition_while_the_others_go_at_once(loading):
    kgc = loading
    waiting, serving = group_on(LOADING_PARTITIONS[0], "loading"), group_on(9, "serving")
    kgc.store.recovered.set()
    await wait_for_states(kgc, LOADING_PARTITIONS, PartitionState.ACTIVE)
    for group in (waiting, serving):
        assert (await kgc.commit(group, 5)).topics[0].partitions[0].error_code == ErrorCode.NONE
    kgc.store.recovered.clear()
    kgc.store.fail(LOADING_PARTITIONS[0], OSError("I/O error"))
    await kgc.commit(waiting, 6)
    await wait_for_states(kgc, LOADING_PARTITIONS[:1], PartitionState.LOADING)

    deleting = asyncio.ensure_future(DeletedTopics(kgc.runtime).delete(DELETED))
    for _ in range(100):
        if (await kgc.call(ApiKey.OffsetFetch, 8, fetch_v8(serving))).groups[0].topics[0].partitions[0] \
                .committed_offset == -1:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the serving partition's offset stayed while another partition loads")
    assert not deleting.done()
    kgc.store.recovered.set()
    before = metrics.REGISTRY.get_sample_value("kgc_offsets_deleted_with_topics_total")
    assert await asyncio.wait_for(deleting, 10) == 2
    assert metrics.REGISTRY.get_sample_value("kgc_offsets_deleted_with_topics_total") == before + 2
    assert (await kgc.call(ApiKey.OffsetFetch, 8, fetch_v8(waiting))).groups[0].topics[0].partitions[0] \
        .committed_offset == -1


async def test_deleted_topics_give_up_on_a_partition_still_loading_and_skip_one_not_served_here(loading, caplog):
    kgc = loading
    served, released = group_on(9, "served"), group_on(10, "released")
    for group in (served, released):
        assert (await kgc.commit(group, 5)).topics[0].partitions[0].error_code == ErrorCode.NONE
    await kgc.runtime.release(10)          # another instance owns it now
    assert await asyncio.wait_for(DeletedTopics(kgc.runtime, load_wait_s=0.3).delete(DELETED), 10) == 1
    for partition in LOADING_PARTITIONS:
        assert f"partition {partition} still loading after 0.3 s: offsets of deleted topics ['orders'] stay" \
            in caplog.text
