"""Decodable but hostile requests against a real kgc over sockets: each may affect its
own group at most. Findings 1 and 2 of the hardening issue, and faults injected into
ops, timers and response encoding, with a healthy group on the same partition watching."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from coordinator.group.classic.manager import Membership
from coordinator.group.shard import GroupShard
from coordinator.net import codec
from coordinator.partitioning import partition_for
from protocol.errors import ErrorCode
from tests.support.builders import (
    commit_request,
    consumer_heartbeat_request,
    delete_groups_request,
    join_request,
    subscription,
)
from tests.support.healthy_group import kgc_with_healthy_group
from tests.support.wire_client import RawMember, WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

RANGE = ("range", subscription("t"))
TOO_LONG = "x" * 40_000     # past the int16 length every record string has


def same_partition(group: str, prefix: str, length: int = 0) -> str:
    """A group id (at least `length` long) on `group`'s partition."""
    target = partition_for(group, 50)
    pad = "p" * max(0, length - len(prefix) - 8)
    for i in itertools.count():
        candidate = f"{prefix}{pad}{i}"
        if partition_for(candidate, 50) == target:
            return candidate
    raise AssertionError("unreachable")


async def assert_healthy(app, healthy: RawMember) -> None:
    """The healthy group still heartbeats and commits, and its partition never failed."""
    assert await healthy.heartbeat() == ErrorCode.NONE
    commit = await healthy.client.call(commit_request(
        8, healthy.group, (("t", 0, 42, None),), member_id=healthy.member_id, generation_id=healthy.generation))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.NONE
    partition = partition_for(healthy.group, 50)
    assert app.runtime.stats()[partition].failures == 0


async def test_repeated_protocol_names_do_not_wedge_the_group():
    # finding 1: a member listing "range" twice made the next join completion raise, and
    # the group stayed in PreparingRebalance for good
    async with kgc_with_healthy_group() as (app, healthy):
        attacker = RawMember(await WireClient.open(app.port, "attacker"), healthy.group,
                             protocols=(RANGE, RANGE))
        parked = asyncio.ensure_future(attacker.join())
        await asyncio.sleep(0.1)
        assert await healthy.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
        await healthy.until_stable()
        assert (await parked).error_code == ErrorCode.NONE
        assert healthy.generation == 2
        await assert_healthy(app, healthy)
        attacker.client.close()


def log_end(app) -> int:
    return sum(app.store.end_offset(p) for p in range(50))


def join_with(**fields):
    return lambda group: join_request(9, group, **fields)


TOO_LONG_FIELDS = {
    # finding 2: each of these reached record serialization, which failed the whole
    # partition (every other group on it answered COORDINATOR_LOAD_IN_PROGRESS)
    "join: group id": (lambda group: join_request(9, TOO_LONG), ErrorCode.INVALID_GROUP_ID),
    "join: member id": (join_with(member_id=TOO_LONG), ErrorCode.INVALID_REQUEST),
    "join: instance id": (join_with(group_instance_id=TOO_LONG), ErrorCode.INVALID_REQUEST),
    "join: protocol type": (join_with(protocol_type=TOO_LONG), ErrorCode.INVALID_REQUEST),
    "join: protocol name": (join_with(protocols=((TOO_LONG, b""),)), ErrorCode.INVALID_REQUEST),
    "commit: topic": (lambda group: commit_request(8, group, ((TOO_LONG, 0, 1, None),)), ErrorCode.INVALID_REQUEST),
    "consumer heartbeat: rack id": (lambda group: consumer_heartbeat_request(1, None, group, rack_id=TOO_LONG),
                                    ErrorCode.INVALID_REQUEST),
    "consumer heartbeat: topic": (lambda group: consumer_heartbeat_request(1, None, group, subscribe=[TOO_LONG]),
                                  ErrorCode.INVALID_REQUEST),
    "delete groups: group id": (lambda group: delete_groups_request(2, TOO_LONG), ErrorCode.INVALID_GROUP_ID),
}


def error_of(response) -> int:
    if hasattr(response, "error_code"):
        return response.error_code
    if hasattr(response, "topics"):
        return response.topics[0].partitions[0].error_code
    return response.results[0].error_code


@pytest.mark.parametrize("case", TOO_LONG_FIELDS)
async def test_a_field_the_record_format_cannot_hold_is_refused_and_nothing_is_written(case):
    build, expected = TOO_LONG_FIELDS[case]
    async with kgc_with_healthy_group() as (app, healthy):
        before = log_end(app)
        client = await WireClient.open(app.port, "attacker")
        response = await client.call(build(same_partition(healthy.group, "victim-")))
        assert error_of(response) == expected
        assert log_end(app) == before
        await assert_healthy(app, healthy)
        client.close()


async def test_a_client_id_that_leaves_no_room_for_a_member_id_is_refused():
    # the header's client id fits an int16, but the member id made from it would not
    async with kgc_with_healthy_group() as (app, healthy):
        before = log_end(app)
        client = await WireClient.open(app.port, "c" * (0x7FFF - 10))
        response = await client.call(join_request(9, same_partition(healthy.group, "victim-")))
        assert response.error_code == ErrorCode.INVALID_REQUEST
        assert log_end(app) == before
        await assert_healthy(app, healthy)
        client.close()


async def test_a_fault_in_a_join_completion_timer_resets_only_its_group(monkeypatch):
    async with kgc_with_healthy_group() as (app, healthy):
        victim_group = same_partition(healthy.group, "victim-")
        real = Membership.complete_join
        faults = []

        def faulty(self, group):
            if group.group_id == victim_group and not faults:
                faults.append(group.group_id)
                raise RuntimeError("injected fault in complete_join")
            return real(self, group)

        monkeypatch.setattr(Membership, "complete_join", faulty)
        client = await WireClient.open(app.port, "victim")
        victim = RawMember(client, victim_group)
        # the initial-delay timer completes the join and raises: the parked join is told to rejoin
        assert (await victim.join()).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert faults == [victim_group]
        await assert_healthy(app, healthy)
        # and the group forms once the member rejoins as a client would
        victim.member_id = ""
        await victim.until_stable()
        assert app.runtime.stats()[partition_for(victim_group, 50)].op_failures == 1
        client.close()


async def test_a_fault_in_a_request_op_answers_unknown_server_error_and_resets_its_group(monkeypatch):
    async with kgc_with_healthy_group() as (app, healthy):
        victim_group = same_partition(healthy.group, "victim-")
        client = await WireClient.open(app.port, "victim")
        victim = RawMember(client, victim_group)
        await victim.until_stable()
        real = GroupShard.heartbeat

        def faulty(self, ctx, request):
            if request.group_id == victim_group:
                raise RuntimeError("injected fault in heartbeat")
            return real(self, ctx, request)

        monkeypatch.setattr(GroupShard, "heartbeat", faulty)
        assert await victim.heartbeat() == ErrorCode.UNKNOWN_SERVER_ERROR
        monkeypatch.setattr(GroupShard, "heartbeat", real)
        # the group was reset: the member is unknown now, and rejoins
        assert await victim.heartbeat() == ErrorCode.UNKNOWN_MEMBER_ID
        victim.member_id = ""
        await victim.until_stable()
        await assert_healthy(app, healthy)
        client.close()


async def test_a_response_that_cannot_be_encoded_is_answered_unknown_server_error(monkeypatch):
    async with kgc_with_healthy_group() as (app, healthy):
        real = codec.encode_response
        faults = []

        def faulty(header, response, version):
            if header.api_key == DescribeGroupsRequest.API_KEY and not faults:
                faults.append(header.api_key)
                raise ValueError("injected fault in the response encoder")
            return real(header, response, version)

        monkeypatch.setattr(codec, "encode_response", faulty)
        client = await WireClient.open(app.port, "describer")
        described = await client.call(DescribeGroupsRequest(version=5, groups=[healthy.group],
                                                            include_authorized_operations=False))
        assert faults and [g.error_code for g in described.groups] == [ErrorCode.UNKNOWN_SERVER_ERROR]
        # the connection stays open and the next answer is whole
        described = await client.call(DescribeGroupsRequest(version=5, groups=[healthy.group],
                                                            include_authorized_operations=False))
        assert described.groups[0].error_code == ErrorCode.NONE and described.groups[0].group_state == "Stable"
        await assert_healthy(app, healthy)
        client.close()


async def test_large_multi_group_requests_are_answered_whole_and_in_order():
    # processed in slices of `service.SLICE` items, yielding to the loop between them
    async with kgc_with_healthy_group() as (app, healthy):
        client = await WireClient.open(app.port, "large")
        names = [f"large-{i}" for i in range(2_500)] + [healthy.group]
        described = await client.call(DescribeGroupsRequest(version=5, groups=names,
                                                            include_authorized_operations=False))
        assert [g.group_id for g in described.groups] == names
        assert described.groups[-1].group_state == "Stable"
        found = await client.call(FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=names))
        assert [c.key for c in found.coordinators] == names
        # a group named twice, more than a slice apart, is deleted once and both get its answer
        assert await commit_to(client, "deleted-twice") == ErrorCode.NONE
        twice = ["deleted-twice"] + [f"absent-{i}" for i in range(1_500)] + ["deleted-twice"]
        deleted = await client.call(DeleteGroupsRequest(version=2, groups_names=twice))
        codes = {r.group_id: r.error_code for r in deleted.results}
        assert [r.error_code for r in deleted.results if r.group_id == "deleted-twice"] == [ErrorCode.NONE] * 2
        assert codes["absent-0"] == ErrorCode.GROUP_ID_NOT_FOUND
        listed = await client.call(ListGroupsRequest(version=5, states_filter=[" STABLE "] * 100_000, types_filter=[]))
        assert [g.group_id for g in listed.groups] == [healthy.group]
        await assert_healthy(app, healthy)
        client.close()


async def commit_to(client: WireClient, group: str) -> int:
    response = await client.call(commit_request(8, group, (("t", 0, 1, None),)))
    return response.topics[0].partitions[0].error_code
