"""Log-end offsets of the partitions groups have committed offsets for, kept fresh for lag.

`LogEnds.refresh(partitions)` asks the upstream where each partition's log ends: Metadata
for the topics (on the cluster's control connection) to find each partition's leader, then
one ListOffsets "latest" per leader for all of its partitions. It runs every
`lag_refresh_interval_ms` for every committed partition (`run`, fed by a callable the app
supplies) and on demand for one group's (/v1/groups/{group}). Each end is kept with the time
the upstream gave it until the next; a partition the upstream answered with a lasting
error (no such topic, not authorized) keeps the reason instead. A refresh that cannot reach
the upstream or a leader, or finds a partition without one or its leader moving (a
retriable error), keeps the known ends, with their old times, rather than make every lag
unknown while the cluster is away or recovering: the time shows how stale each is, and
`refresh` says whether it refreshed every end (`kgc_log_ends_refreshed_timestamp_seconds`
and the failure count come from that).

Topics the upstream does not have are remembered (`missing_topics`) and each is logged once
at WARNING with the groups that committed offsets for it: after a restart over an upstream
that lost its topics (the embedded broker keeps them in memory), those groups would resume
past the end of empty topics and read nothing, silently. After the first refresh a topic
must be missing from two in a row: a deletion kgc sees takes the topic's offsets in between
(`service/deleted_topics.py`), and only what stays is worth a warning.

Lag itself (`coordinator.consumer_lag`) is never negative: an end below the committed
offset makes it unknown, with the reason.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from coordinator.consumer_lag import NOT_FETCHED, LogEnd
from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from coordinator.periodic import run_every
from protocol.errors import RETRIABLE, ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
CLIENT_ID = "kgc-lag"
LATEST = -1
# v4 is the first that can ask not to create the topics it names (v1-v3 create them on a
# broker with auto-creation on, as Tansu does): asking where a log ends must not create it.
_METADATA_VERSION = 4
_LIST_OFFSETS_VERSIONS = (1, 7)  # v1: one offset per partition; v7 is the newest kafka-python writes here
INTERNAL_TOPIC = "__consumer_offsets"
_INTERNAL = LogEnd(None, "kgc serves __consumer_offsets itself: no lag is kept for readers of it")
_NOT_FETCHED = LogEnd(None, NOT_FETCHED)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class LogEnds:
    def __init__(self, cluster: UpstreamCluster, *, request_timeout_ms: int = 5_000,
                 clock: Callable[[], int] = wall_ms):
        self._cluster = cluster
        self._timeout_s = request_timeout_ms / 1000
        self._clock = clock
        self._ends: dict[TopicPartition, LogEnd] = {}
        self._leaders: dict[int, UpstreamConnection] = {}
        self._correlation_ids = itertools.count(1)
        self.missing_topics: set[str] = set()
        self._missing_before: set[str] | None = None   # as of the previous warn_missing; None before it
        self._warned: set[str] = set()

    def end_of(self, tp: TopicPartition) -> LogEnd:
        if tp[0] == INTERNAL_TOPIC:
            return _INTERNAL
        return self._ends.get(tp, _NOT_FETCHED)

    async def refresh(self, partitions: Iterable[TopicPartition]) -> bool:
        """Fetches the log end of each partition (bounded): True when the upstream answered
        for every one (a lasting error it answered is kept as the reason), False when it or a
        partition's leader could not be reached in time, or a partition had no leader or
        answered a retriable error (known ends stay, with their time)."""
        wanted = sorted({tp for tp in partitions if tp[0] != INTERNAL_TOPIC})
        if not wanted:
            return True
        try:
            return await asyncio.wait_for(self._refresh(wanted), self._timeout_s)
        except (UpstreamUnavailable, TimeoutError) as exc:
            self._unavailable(wanted, f"log end offset unavailable: {exc or type(exc).__name__}")
            return False

    def _unavailable(self, tps: Iterable[TopicPartition], reason: str) -> None:
        """Not refreshed this time, for a passing reason (a leader unreachable, moving or not
        yet elected): a known end stays, with its time; an unknown one says why."""
        for tp in tps:
            old = self._ends.get(tp)
            if old is None or old.offset is None:
                self._ends[tp] = LogEnd(None, reason)

    async def _refresh(self, wanted: list[TopicPartition]) -> bool:
        topics = sorted({t for t, _ in wanted})
        low, high = self._cluster.api_versions.get(ApiKey.Metadata, (0, -1))
        if not low <= _METADATA_VERSION <= high:
            raise UpstreamUnavailable(f"upstream serves Metadata {low}-{high}: kgc asks for log ends with "
                                      f"v{_METADATA_VERSION}")
        metadata = await self._cluster.request(
            MetadataRequest[_METADATA_VERSION](topics=topics, allow_auto_topic_creation=False), MetadataResponse)
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        leaders: dict[TopicPartition, int] = {}
        for topic in metadata.topics:
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                self.missing_topics.add(topic.name)
                continue
            self.missing_topics.discard(topic.name)
            for p in topic.partitions:
                leaders[(topic.name, p.partition_index)] = p.leader_id
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        leaderless = []
        for tp in wanted:
            if tp[0] in self.missing_topics:
                self._ends[tp] = LogEnd(None, f"topic {tp[0]} does not exist upstream")
            elif tp not in leaders or leaders[tp] not in brokers:
                leaderless.append(tp)
            else:
                by_leader[leaders[tp]].append(tp)
        self._unavailable(leaderless, "partition has no leader upstream")
        answered = await asyncio.gather(*(self._list_offsets(node, brokers[node], tps)
                                          for node, tps in by_leader.items()))
        return all(answered) and not leaderless

    async def _list_offsets(self, node: int, address: tuple[str, int], tps: list[TopicPartition]) -> bool:
        low, high = self._cluster.api_versions.get(ApiKey.ListOffsets, (0, -1))
        version = min(high, _LIST_OFFSETS_VERSIONS[1])
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in tps:
            by_topic[topic].append(partition)
        request = ListOffsetsRequest[version](replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(version=version, name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    version=version, partition_index=p, current_leader_epoch=-1, timestamp=LATEST)
                for p in partitions])
            for topic, partitions in by_topic.items()])
        if version < max(low, _LIST_OFFSETS_VERSIONS[0]):
            for tp in tps:
                self._ends[tp] = LogEnd(None, f"upstream serves ListOffsets {low}-{high}")
            return True
        try:
            response = await self._send(node, address, request)
        except UpstreamUnavailable as exc:
            self._unavailable(tps, f"log end offset unavailable: {exc}")
            return False
        now = self._clock()
        refreshed = True
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if not p.error_code:
                    self._ends[tp] = LogEnd(p.offset, None, now)
                    continue
                reason = f"upstream answered {ErrorCode(p.error_code).name}"
                if p.error_code in RETRIABLE:
                    # A leader moving (a broker back from a pause, say): as unreachable as
                    # one that did not answer, and the next refresh will ask again.
                    self._unavailable([tp], reason)
                    refreshed = False
                else:
                    self._ends[tp] = LogEnd(None, reason)
        return refreshed

    async def _send(self, node: int, address: tuple[str, int], request) -> ListOffsetsResponse:
        conn = self._leaders.get(node)
        if conn is None or conn.failure is not None or (conn.host, conn.port) != address:
            if conn is not None:
                await conn.close()
            conn = self._leaders[node] = await self._cluster.own_connection(
                *address, connect_timeout_ms=int(self._timeout_s * 1000))
        correlation_id = next(self._correlation_ids)
        request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
        payload = await conn.send(correlation_id, request.encode(header=True), True)
        return ListOffsetsResponse.decode(payload, version=request.API_VERSION, header=True)

    def warn_missing(self, committed_by: Mapping[str, Iterable[str]]) -> None:
        """Once per topic: the groups (`committed_by[topic]`) holding offsets for a topic the
        upstream does not have (see the module's docstring)."""
        before, self._missing_before = self._missing_before, set(self.missing_topics)
        missing = self.missing_topics if before is None else self.missing_topics & before
        for topic in sorted(missing - self._warned):
            groups = sorted(committed_by.get(topic, ()))
            if not groups:
                continue
            self._warned.add(topic)
            log.warning("groups %s have committed offsets for topic %s, which the upstream does not have: "
                        "their consumers will find no such topic, or, once it is created again, start past "
                        "its end (an upstream that lost its topics, such as the embedded broker after a "
                        "restart, does this)", ", ".join(groups[:10]) + (" ..." if len(groups) > 10 else ""),
                        topic)

    async def close(self) -> None:
        leaders, self._leaders = self._leaders, {}
        await asyncio.gather(*(conn.close() for conn in leaders.values()))


async def keep_fresh(log_ends: LogEnds, committed: Callable[[], Awaitable[Mapping[str, Mapping[TopicPartition, int]]]],
                     interval_ms: int, stopping: asyncio.Event,
                     on_refreshed: Callable[[Mapping[str, Mapping[TopicPartition, int]], bool], None]) -> None:
    """Now, then every `interval_ms` (0: only now, for the missing-topic warning): the log
    end of every partition some group has an offset for, then `on_refreshed(committed,
    reached)`, `reached` saying whether every partition's end was refreshed."""
    async def step() -> None:
        offsets = await committed()
        reached = await log_ends.refresh(tp for by_partition in offsets.values() for tp in by_partition)
        committed_by: dict[str, set[str]] = defaultdict(set)
        for group, by_partition in offsets.items():
            for topic, _ in by_partition:
                committed_by[topic].add(group)
        log_ends.warn_missing(committed_by)
        on_refreshed(offsets, reached)

    try:
        await step()
    except Exception:
        log.exception("log end offset refresh failed")
    if interval_ms > 0:
        await run_every(interval_ms, stopping, step, "log end offset refresh")
