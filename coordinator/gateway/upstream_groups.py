"""The upstream cluster's own group coordinator, asked as a client would ask it.

For adoption (`coordinator.service.adoption`), `kgc import` and `kgc export`:
`snapshot(group)` finds the group's coordinator upstream (where the cluster's last read
of `__consumer_offsets` places it, else FindCoordinator on the control broker) and asks it
DescribeGroups (state, protocol type, members), ConsumerGroupDescribe when DescribeGroups
says Dead (a KIP-848 group), and OffsetFetch (committed offsets); `list_groups()` asks ListGroups of every broker;
`commit(group, offsets)` writes offsets with OffsetCommit as a simple (generation -1)
commit, as `kafka-consumer-groups --reset-offsets` does.

The three questions to the coordinator go out together: a new group's adoption waits for
one round trip (the three at once), two when FindCoordinator is asked first, not six in a
row. An address taken from the last read that fails (the leader moved: NOT_COORDINATOR, or
it went) is asked again at once through FindCoordinator.
ConsumerGroupDescribe's answer counts only when DescribeGroups says Dead, so its failure
about a classic group is no failure of the snapshot. OffsetFetch asks for "all topics"
(null, v2 on): Kafka 4.4 and Tansu 0.6 both list a group's committed topics on it, checked
against both; only a coordinator that speaks OffsetFetch v1 alone is asked naming every
partition of every topic in the cluster's Metadata.

One connection per coordinator address, opened on first use and replaced once failed;
every request is bounded by the cluster's request timeout. Failures (no live broker,
refused, timed out, an error code where an answer was due) raise `UpstreamUnavailable`:
the caller answers a retriable error and never takes a failure for an empty group.
A coordinator that is not ready (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR) is asked again within `NOT_READY_RETRY_S`, as Kafka's clients do: a
cluster whose coordinator nobody has used yet creates `__consumer_offsets` at the first
FindCoordinator and answers COORDINATOR_NOT_AVAILABLE until its partitions have leaders,
and a client told to retry waits its own backoff (librdkafka's JoinGroup: 3 s) where
the topic is ready within a second.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable

from kafka.protocol.admin.groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.group import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable, call
from coordinator.group.adopt import AdoptedOffset, UpstreamGroup
from protocol.api_keys import NoCommonVersion, pick_version
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from protocol.errors import ErrorCode

CLIENT_ID = "kgc-adoption"
# Versions kafka-python encodes and Kafka 4 and Tansu both serve; newer ones add nothing used here.
FIND_COORDINATOR_VERSIONS = (1, 3)
DESCRIBE_GROUPS_VERSIONS = (0, 5)
CONSUMER_GROUP_DESCRIBE_VERSIONS = (0, 1)
OFFSET_FETCH_VERSIONS = (1, 8)
OFFSET_COMMIT_VERSIONS = (2, 7)
LIST_GROUPS_VERSIONS = (0, 4)
METADATA_VERSIONS = (1, 8)
_OFFSET_FETCH_BATCHED = 8   # v8+ (KIP-709) nests topics under groups
NOT_READY_RETRY_S = 2.0
NOT_READY_BACKOFF_S = (0.05, 0.4)   # first wait, longest wait (doubling)
_NOT_READY = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.NOT_COORDINATOR})


class CoordinatorNotReady(UpstreamUnavailable):
    """The upstream's coordinator answered that it is not ready (yet, or not here)."""


class UpstreamGroups:
    def __init__(self, cluster: UpstreamCluster, *, request_timeout_ms: int = 10_000):
        self._cluster = cluster
        self._timeout_s = request_timeout_ms / 1000
        self._connections: dict[tuple[str, int], UpstreamConnection] = {}
        self._opening: dict[tuple[str, int], asyncio.Lock] = {}
        self._correlation_ids = itertools.count(1)

    async def snapshot(self, group_id: str) -> UpstreamGroup:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + NOT_READY_RETRY_S
        wait, longest = NOT_READY_BACKOFF_S
        placed = self._cluster.group_coordinator(group_id)
        while True:
            try:
                return await self._snapshot(group_id, placed)
            except UpstreamUnavailable as exc:
                if placed is not None:
                    placed = None
                    continue
                if not isinstance(exc, CoordinatorNotReady) or loop.time() + wait > deadline:
                    raise
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)

    async def _snapshot(self, group_id: str, placed: tuple[str, int] | None) -> UpstreamGroup:
        coordinator = placed or await self._coordinator(group_id)
        answers = await asyncio.gather(
            self._describe(coordinator, group_id), self._fetch_offsets(coordinator, group_id),
            self._describe_consumer_group(coordinator, group_id), return_exceptions=True)
        described, offsets, found = answers  # in two steps: mypy cannot unpack the await's Any at once
        if isinstance(described, BaseException):
            raise described
        if isinstance(offsets, BaseException):
            raise offsets
        state, protocol_type = described.group_state, described.protocol_type
        members = tuple(m.member_id for m in described.members)
        if state == "Dead":
            # Kafka 4 answers DescribeGroups for a KIP-848 group, live or not, as Dead with no
            # members: only ConsumerGroupDescribe shows them.
            if isinstance(found, BaseException):
                raise found
            if found is not None:
                state, protocol_type = found.group_state, "consumer"
                members = tuple(m.member_id for m in found.members)
        return UpstreamGroup(group_id, state, protocol_type, members, tuple(offsets))

    async def list_groups(self) -> list[str]:
        version = self._version(ApiKey.ListGroups, LIST_GROUPS_VERSIONS)
        request_args: dict[str, list[str]] = {"states_filter": []} if version >= 4 else {}
        addresses = [(b.host, b.port) for b in self._cluster.brokers.values()] or [self._live()]
        found: dict[str, None] = {}
        for address in addresses:
            response = await self._call(address, ListGroupsRequest[version](**request_args), ListGroupsResponse)
            _check(response.error_code, "ListGroups")
            found.update((g.group_id, None) for g in response.groups)
        return list(found)

    async def commit(self, group_id: str, offsets: Iterable[AdoptedOffset]) -> None:
        coordinator = await self._coordinator(group_id)
        version = self._version(ApiKey.OffsetCommit, OFFSET_COMMIT_VERSIONS)
        cls = OffsetCommitRequest[version]
        topic_cls = cls.OffsetCommitRequestTopic
        partition_cls = topic_cls.OffsetCommitRequestPartition
        by_topic: dict[str, list[AdoptedOffset]] = {}
        for offset in offsets:
            by_topic.setdefault(offset.topic, []).append(offset)
        args = {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": ""}
        if version >= 7:
            args["group_instance_id"] = None
        if version <= 4:
            args["retention_time_ms"] = -1
        request = cls(**args, topics=[topic_cls(name=topic, partitions=[
            partition_cls(partition_index=o.partition, committed_offset=o.offset, committed_metadata=o.metadata,
                          **({"committed_leader_epoch": o.leader_epoch} if version >= 6 else {}))
            for o in partitions]) for topic, partitions in by_topic.items()])
        response = await self._call(coordinator, request, OffsetCommitResponse)
        for topic in response.topics:
            for partition in topic.partitions:
                _check(partition.error_code, f"OffsetCommit {topic.name}-{partition.partition_index}")

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    # ---- the steps ------------------------------------------------------------------

    async def _coordinator(self, group_id: str) -> tuple[str, int]:
        live = self._live()
        version = self._version(ApiKey.FindCoordinator, FIND_COORDINATOR_VERSIONS)
        response = await self._call(live, FindCoordinatorRequest[version](key=group_id, key_type=0),
                                    FindCoordinatorResponse)
        _check(response.error_code, f"FindCoordinator for {group_id!r}")
        return response.host, response.port

    async def _describe(self, coordinator: tuple[str, int], group_id: str):
        version = self._version(ApiKey.DescribeGroups, DESCRIBE_GROUPS_VERSIONS)
        args = {"include_authorized_operations": False} if version >= 3 else {}
        response = await self._call(coordinator, DescribeGroupsRequest[version](groups=[group_id], **args),
                                    DescribeGroupsResponse)
        (described,) = response.groups
        if described.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
            _check(described.error_code, f"DescribeGroups {group_id!r}")
        return described

    async def _describe_consumer_group(self, coordinator: tuple[str, int], group_id: str):
        """The KIP-848 group `group_id`, or None when the coordinator has no such group or no
        such groups at all (Kafka 3.9 lists ConsumerGroupDescribe but answers UNSUPPORTED_VERSION
        while its consumer protocol is off, and older brokers do not list it)."""
        if ApiKey.ConsumerGroupDescribe not in self._cluster.api_versions:
            return None
        version = self._version(ApiKey.ConsumerGroupDescribe, CONSUMER_GROUP_DESCRIBE_VERSIONS)
        # kafka-python's metaclass makes a message class indexable by version; mypy sees no metaclass.
        response = await self._call(coordinator, ConsumerGroupDescribeRequest[version](  # type: ignore[misc]
            group_ids=[group_id], include_authorized_operations=False), ConsumerGroupDescribeResponse)
        (described,) = response.groups
        if described.error_code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
            return None
        _check(described.error_code, f"ConsumerGroupDescribe {group_id!r}")
        return described

    async def _fetch_offsets(self, coordinator: tuple[str, int], group_id: str) -> list[AdoptedOffset]:
        version = self._version(ApiKey.OffsetFetch, OFFSET_FETCH_VERSIONS)
        if version >= 2:  # null means "all topics" from v2 on
            return await self._offset_fetch(coordinator, version, group_id, None)
        return await self._offset_fetch(coordinator, version, group_id, await self._all_partitions())

    async def _offset_fetch(self, coordinator: tuple[str, int], version: int, group_id: str,
                            topics: dict[str, list[int]] | None) -> list[AdoptedOffset]:
        cls = OffsetFetchRequest[version]
        if version >= _OFFSET_FETCH_BATCHED:
            group_cls = cls.OffsetFetchRequestGroup
            topic_cls = group_cls.OffsetFetchRequestTopics
            named = None if topics is None else [topic_cls(name=t, partition_indexes=ps) for t, ps in topics.items()]
            request = cls(groups=[group_cls(group_id=group_id, topics=named)], require_stable=False)
        else:
            topic_cls = cls.OffsetFetchRequestTopic
            named = None if topics is None else [topic_cls(name=t, partition_indexes=ps) for t, ps in topics.items()]
            request = cls(group_id=group_id, topics=named, **({"require_stable": False} if version >= 7 else {}))
        response = await self._call(coordinator, request, OffsetFetchResponse)
        if version >= _OFFSET_FETCH_BATCHED:
            (group,) = response.groups
            _check(group.error_code, f"OffsetFetch {group_id!r}")
            fetched_topics = group.topics
        else:
            if version >= 2:
                _check(response.error_code, f"OffsetFetch {group_id!r}")
            fetched_topics = response.topics
        offsets = []
        for topic in fetched_topics:
            for p in topic.partitions:
                _check(p.error_code, f"OffsetFetch {group_id!r} {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    epoch = p.committed_leader_epoch if version >= 5 else -1
                    offsets.append(AdoptedOffset(topic.name, p.partition_index, p.committed_offset, epoch,
                                                 p.metadata or ""))
        return offsets

    async def _all_partitions(self) -> dict[str, list[int]]:
        version = self._version(ApiKey.Metadata, METADATA_VERSIONS)
        args = {"allow_auto_topic_creation": False} if version >= 4 else {}
        metadata = await self._call(self._live(), MetadataRequest[version](topics=None, **args), MetadataResponse)
        return {t.name: [p.partition_index for p in t.partitions] for t in metadata.topics
                if not t.error_code and not t.is_internal}

    # ---- plumbing -------------------------------------------------------------------

    def _live(self) -> tuple[str, int]:
        address = self._cluster.live_broker()
        if address is None:
            raise UpstreamUnavailable(self._cluster.status, before_connect=True)
        return address

    def _version(self, api_key: int, ours: tuple[int, int]) -> int:
        try:
            return pick_version(ours, self._cluster.api_versions.get(api_key), ApiKey(api_key).name)
        except NoCommonVersion as exc:
            raise UpstreamUnavailable(str(exc)) from exc

    async def _call(self, address: tuple[str, int], request, response_class):
        connection = self._connections.get(address)
        if connection is None or connection.failure is not None:
            # One opening per address: the snapshot's questions go out together.
            async with self._opening.setdefault(address, asyncio.Lock()):
                connection = self._connections.get(address)
                if connection is None or connection.failure is not None:
                    connection = self._connections[address] = await self._cluster.own_connection(*address)
        return await call(connection, next(self._correlation_ids), request, response_class, client_id=CLIENT_ID,
                          timeout_s=self._timeout_s)


def _check(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        error = CoordinatorNotReady if code in _NOT_READY else UpstreamUnavailable
        raise error(f"{what}: upstream answered {name}")
