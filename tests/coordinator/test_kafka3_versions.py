"""The group API versions Kafka 4.0 removed (KIP-896) and Kafka 3.9 served, over real
sockets: kafka-python's codecs encode each request at its version and decode kgc's answer
at it, one connection per request, against kgc in this process with a data dir.

The sequence is the one a sarama 1.22 consumer group sends (FindCoordinator v0, JoinGroup
v1, SyncGroup v0, Heartbeat v0, OffsetCommit v1, OffsetFetch v1, LeaveGroup v0), plus
OffsetCommit and OffsetFetch v0; `min_group_api_versions = "kafka4"` refuses the removed
ones with UNSUPPORTED_VERSION, in each request's own shape, and stores nothing.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest

from coordinator.probe import request_response
from coordinator.settings import ServerConfig
from protocol.errors import ErrorCode
from protocol.messages import response_class
from tests.support.builders import subscription
from tests.support.kgc import TEST_GROUP_CONFIG, running_kgc
from tests.support.kgc_http import in_process

pytestmark = pytest.mark.timeout(60)

TOPIC = "orders"
NONE, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION = 0, int(ErrorCode.UNKNOWN_MEMBER_ID), int(ErrorCode.UNSUPPORTED_VERSION)


def config(data_dir, floor: str = "kafka3") -> ServerConfig:
    return ServerConfig(host="127.0.0.1", port=0, data_dir=str(data_dir), group=TEST_GROUP_CONFIG,
                        min_group_api_versions=floor)


async def call(port: int, request):
    """One request on its own connection; the answer decoded at the request's version."""
    return await asyncio.to_thread(request_response, ("127.0.0.1", port), request,
                                   response_class(request.API_KEY), timeout_s=10.0)


def commit(version: int, group: str, offsets: dict[int, int], *, member_id: str = "", generation: int = -1,
           timestamps: dict[int, int] | None = None) -> OffsetCommitRequest:
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    part = topic.OffsetCommitRequestPartition
    return OffsetCommitRequest(version=version, group_id=group, generation_id_or_member_epoch=generation,
                               member_id=member_id, topics=[topic(name=TOPIC, partitions=[
                                   part(partition_index=p, committed_offset=o,
                                        commit_timestamp=(timestamps or {}).get(p, -1), committed_metadata=f"m{p}")
                                   for p, o in offsets.items()])])


def fetch(version: int, group: str, partitions: list[int]) -> OffsetFetchRequest:
    return OffsetFetchRequest(version=version, group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=partitions)])


def commit_errors(response) -> dict[int, int]:
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def fetched(response) -> dict[int, tuple[int, str, int]]:
    return {p.partition_index: (p.committed_offset, p.metadata, p.error_code)
            for t in response.topics for p in t.partitions}


def api_ranges(response) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


async def test_a_sarama_style_group_commits_with_v1_and_reads_back_with_v0_and_v1_across_a_restart(tmp_path):
    group = f"old-{uuid.uuid4().hex[:8]}"
    async with running_kgc(config(tmp_path)) as app:
        port = app.port
        versions = api_ranges(await call(port, ApiVersionsRequest(version=0)))
        assert versions[ApiKey.OffsetCommit] == (0, 10) and versions[ApiKey.OffsetFetch] == (0, 10)

        found = await call(port, FindCoordinatorRequest(version=0, key=group))
        assert (found.error_code, found.port) == (NONE, port)

        joined = await call(port, JoinGroupRequest(
            version=1, group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=subscription(TOPIC))]))
        assert joined.error_code == NONE and joined.leader == joined.member_id
        member, generation = joined.member_id, joined.generation_id
        synced = await call(port, SyncGroupRequest(
            version=0, group_id=group, generation_id=generation, member_id=member, assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"\x00\x01")]))
        assert (synced.error_code, synced.assignment) == (NONE, b"\x00\x01")
        beat = await call(port, HeartbeatRequest(version=0, group_id=group, generation_id=generation,
                                                 member_id=member))
        assert beat.error_code == NONE

        # sarama's default (Consumer.Offsets.Retention 0): v1, the receive-time timestamp -1.
        committed = await call(port, commit(1, group, {0: 10, 1: 11}, member_id=member, generation=generation,
                                            timestamps={1: 1_700_000_000_000}))
        assert commit_errors(committed) == {0: NONE, 1: NONE}
        # v0 carries no member: refused while the group has one, nothing stored.
        outsider = await call(port, commit(0, group, {0: 99}))
        assert commit_errors(outsider) == {0: UNKNOWN_MEMBER_ID}
        for version in (0, 1):
            assert fetched(await call(port, fetch(version, group, [0, 1, 2]))) == {
                0: (10, "m0", NONE), 1: (11, "m1", NONE), 2: (-1, "", NONE)}

        left = await call(port, LeaveGroupRequest(version=0, group_id=group, member_id=member))
        assert left.error_code == NONE
        # Empty now: a v0 commit is a commit outside any generation, as an admin tool's.
        assert commit_errors(await call(port, commit(0, group, {2: 12}))) == {2: NONE}

    async with running_kgc(config(tmp_path)) as app:
        for version in (0, 1, 8):
            request = fetch(version, group, [0, 1, 2])
            if version == 8:
                request = OffsetFetchRequest(version=8, groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                        name=TOPIC, partition_indexes=[0, 1, 2])])], require_stable=False)
                response = await call(app.port, request)
                got = {p.partition_index: (p.committed_offset, p.metadata, p.error_code)
                       for t in response.groups[0].topics for p in t.partitions}
            else:
                got = fetched(await call(app.port, request))
            assert got == {0: (10, "m0", NONE), 1: (11, "m1", NONE), 2: (12, "m2", NONE)}, version


async def test_the_kafka4_floor_refuses_what_kafka_4_removed_and_stores_nothing(tmp_path):
    group = f"cut-{uuid.uuid4().hex[:8]}"
    before = in_process()
    async with running_kgc(config(tmp_path, "kafka4")) as app:
        port = app.port
        versions = api_ranges(await call(port, ApiVersionsRequest(version=3, client_software_name="t",
                                                                  client_software_version="1")))
        assert versions[ApiKey.OffsetCommit] == (2, 10) and versions[ApiKey.OffsetFetch] == (1, 10)
        for version in (0, 1):
            refused = await call(port, commit(version, group, {0: 5, 3: 6}))
            assert commit_errors(refused) == {0: UNSUPPORTED_VERSION, 3: UNSUPPORTED_VERSION}
        refused_fetch = await call(port, fetch(0, group, [0]))
        assert fetched(refused_fetch) == {0: (-1, "", UNSUPPORTED_VERSION)}
        assert commit_errors(await call(port, commit(2, group, {1: 7}))) == {1: NONE}
        assert fetched(await call(port, fetch(1, group, [0, 1, 3]))) == {
            0: (-1, "", NONE), 1: (7, "m1", NONE), 3: (-1, "", NONE)}
    # Refusals show in the metrics an operator watches: per version, and as errors.
    after = in_process()

    def delta(name: str, **labels: str) -> float:
        return after.total(name, **labels) - before.total(name, **labels)

    assert delta("kgc_requests_total", api="OffsetCommit", version="0") == 1
    assert delta("kgc_requests_total", api="OffsetCommit", version="1") == 1
    assert delta("kgc_response_errors_total", api="OffsetCommit", error="UNSUPPORTED_VERSION") == 4
    assert delta("kgc_response_errors_total", api="OffsetFetch", error="UNSUPPORTED_VERSION") == 1
