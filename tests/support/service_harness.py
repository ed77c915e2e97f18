"""The group coordinator service over a memory log, driven as a client would: each request and
answer goes through the wire codecs at its version; and the OffsetFetch requests the tests send."""

from __future__ import annotations

import asyncio
import itertools

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import (
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from coordinator.group.config import GroupConfig
from coordinator.group.context import RequestContext
from coordinator.group.shard import group_shard_factory
from coordinator.node import CoordinatorNode
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.service.group_coordinator import GroupCoordinatorService
from protocol.api_keys import response_header_version
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.messages import decode_request, encode_response, response_class
from storage.memory_store import MemoryLogStore


async def handled(service: GroupCoordinatorService, ctx: RequestContext, api_key: int, request):
    """What the dispatcher does with a request: submit it, and answer its future when done."""
    outcome = service.submit(ctx, api_key, request)
    if not isinstance(outcome, asyncio.Future):
        return outcome
    await asyncio.wait([outcome])
    return service.answer(ctx, api_key, request, outcome)


NODE = CoordinatorNode(7, "kgc.test", 19092)
CONFIG = GroupConfig(initial_rebalance_delay_ms=0)


class Coordinator:
    def __init__(self, store: MemoryLogStore):
        ids = itertools.count(1)
        loop = asyncio.get_running_loop()
        self.store = store

        def clock() -> int:
            return int(loop.time() * 1000)

        shards = group_shard_factory(CONFIG, clock, lambda client_id: f"{client_id}-{next(ids)}")
        self.runtime = CoordinatorRuntime(store, CONFIG.num_partitions, clock=clock, shard_factory=shards)
        self.service = GroupCoordinatorService(self.runtime, NODE)

    async def start(self, wait: bool = True) -> None:
        await self.runtime.start()
        if wait:
            await self.runtime.wait_loaded()

    async def call(self, api_key: int, version: int, request, client_id: str = "client"):
        """Encode, decode, handle, encode, decode: what a client would read. The answer is
        encoded as kgc encodes it (`encode_response`, hand codecs included)."""
        decoded = decode_request(api_key, version, request.encode(version=version))
        response = await handled(self.service, RequestContext(version, client_id), api_key, decoded)
        frame = encode_response(RequestHeader(api_key, version, 1, client_id, 0), response, version)
        body = frame[8 + response_header_version(api_key, version):]     # size, correlation id, [tags]
        return response_class(api_key).decode(body, version=version)

    def send(self, api_key: int, version: int, request, client_id: str = "client") -> asyncio.Task:
        return asyncio.ensure_future(self.call(api_key, version, request, client_id))

    # ---- requests, with defaults a consumer would send ----

    async def join(self, group_id: str, member_id: str = "", version: int = 5, client_id: str = "client"):
        request = JoinGroupRequest(group_id=group_id, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                   member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                   protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                        metadata=b"sub")])
        return await self.call(ApiKey.JoinGroup, version, request, client_id)

    async def member(self, group_id: str) -> tuple[str, int]:
        """A member that joined, leads and synced: (member id, generation)."""
        first = await self.join(group_id)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await self.join(group_id, first.member_id)
        assert joined.error_code == ErrorCode.NONE and joined.leader == first.member_id
        synced = await self.call(ApiKey.SyncGroup, 3, SyncGroupRequest(
            group_id=group_id, generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id=None, assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=joined.member_id, assignment=b"assigned")]))
        assert synced.error_code == ErrorCode.NONE and synced.assignment == b"assigned"
        return joined.member_id, joined.generation_id

    async def commit(self, group_id: str, offset: int, topic: str = "orders", partition: int = 0,
                     version: int = 8, member_id: str = "", generation: int = -1):
        request = OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=None, retention_time_ms=-1, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic, partitions=[OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="meta")])])
        return await self.call(ApiKey.OffsetCommit, version, request)


def fetch_v8(*group_ids: str | None) -> OffsetFetchRequest:
    return OffsetFetchRequest(require_stable=False, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=[
            OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="orders",
                                                                                partition_indexes=[0])])
        for g in group_ids])


def fetch_v0(group_id: str) -> OffsetFetchRequest:
    return OffsetFetchRequest(group_id=group_id, require_stable=False, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="orders", partition_indexes=[0, 1])])
