"""The upstream Kafka cluster as kgc sees it: its brokers, its API ranges, whether it answers.

One `UpstreamCluster` per process keeps a control connection to some upstream broker
(the last live one it knew, else the bootstrap addresses in turn), asks it ApiVersions
once per connection and Metadata (all topics) every `refresh_interval_ms`, and also learns
the broker set from Metadata responses passing through the gateway (`observe_brokers`).
When the set changes, subscribers hear of it (the network layer opens a listener per new
broker). The leaders of the upstream's `__consumer_offsets` partitions, from the same read,
tell where its coordinator of a group is (`group_coordinator`). The topics (ids, names,
partition counts) become a `TopicImage` for KIP-848 consumer groups, whose assignments name
the cluster's own topic ids; its version moves only when a topic appears, goes, is
recreated or gains partitions.

Unreachable upstream never stops kgc: the loop retries with exponential backoff, each
attempt bounded by `connect_timeout_ms` / `request_timeout_ms`, and `status` says why it
is not reachable, for /readyz. A broker set that breaks the listener plan (an upstream
broker using kgc's node id, two nodes on one port) is refused, and `status` says so.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from coordinator.gateway.login import UpstreamLogin, login
from coordinator.gateway.offsets_metadata import TOPIC as OFFSETS_TOPIC
from coordinator.gateway.plan import ListenerPlan, ListenerPlanError
from coordinator.gateway.rewrite import Broker
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable
from coordinator.gateway.versions import NO_FEATURES, Features
from coordinator.group.topics import EMPTY_TOPIC_IMAGE, TopicImage, TopicMetadata, gone_topics
from coordinator.partitioning import partition_for
from coordinator.version import kgc_version
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CLIENT_ID = "kgc-gateway"
_NEWEST_METADATA = 12  # the brokers and topic ids of v12 are all we read
_TOPIC_IDS_SINCE = 10  # Metadata v10 added topic ids
_NO_AUTO_CREATION_SINCE = 4     # Metadata v4 added allow_auto_topic_creation
_FIND_COORDINATOR_VERSION = 3  # the last with one key per request
_FEATURES_SINCE = 3    # ApiVersions v3 added the feature flags (KIP-584)
CLOSE_TIMEOUT_S = 1.0
# A member naming a topic kgc has not seen waits for one refresh, at most this long; and a
# name is asked for at most once in this interval, so members subscribed to a topic that
# does not exist cost one Metadata request a second, not one per heartbeat.
LEARN_TOPICS_WAIT_S = 1.0
LEARN_TOPICS_MIN_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class BrokerChange:
    brokers: Mapping[int, Broker]
    added: frozenset[int]
    removed: frozenset[int]


class UpstreamCluster:
    def __init__(self, bootstrap: Iterable[tuple[str, int]], *, plan: ListenerPlan | None = None,
                 refresh_interval_ms: int = 5_000, connect_timeout_ms: int = 5_000,
                 request_timeout_ms: int = 10_000, backoff_initial_ms: int = 100,
                 backoff_max_ms: int = 10_000, tls: ssl.SSLContext | None = None,
                 login: UpstreamLogin | None = None):
        self._bootstrap = list(bootstrap)
        self.tls = tls                    # kgc's TLS client context for every upstream connection
        self._login = login               # kgc's own SASL identity for its control connection
        if not self._bootstrap:
            raise ValueError("an upstream cluster needs at least one bootstrap address")
        self._plan = plan
        self.refresh_interval_ms = refresh_interval_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._backoff_initial_ms = backoff_initial_ms
        self._backoff_max_ms = backoff_max_ms
        self._brokers: Mapping[int, Broker] = MappingProxyType({})
        self._topics: TopicImage = EMPTY_TOPIC_IMAGE
        self._offsets_leaders: tuple[int, ...] = ()   # node id by __consumer_offsets partition
        self._api_versions: Mapping[int, tuple[int, int]] = MappingProxyType({})
        self.features: Features = NO_FEATURES    # from the last ApiVersions v3+ answer
        self.cluster_id: str | None = None
        self.reachable = False
        self._plan_error: str | None = None
        self._status = "not contacted yet"
        self._control: UpstreamConnection | None = None
        self._correlation_ids = itertools.count(1)
        self._subscribers: list[Callable[[BrokerChange], None]] = []
        self._on_topics_deleted: list[Callable[[Mapping[str, uuid.UUID]], None]] = []
        self._wake = asyncio.Event()
        self._next_refresh: asyncio.Future | None = None    # done when the refresh asked for ends
        self._asked: dict[str, float] = {}      # a topic name not seen -> when a refresh was asked for it
        self._reached = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._attempt = 0
        self._failed_attempts = 0
        self._last_failure: str | None = None

    # -- what the rest of kgc reads -------------------------------------------------

    @property
    def brokers(self) -> Mapping[int, Broker]:
        return self._brokers

    @property
    def topics(self) -> TopicImage:
        """The upstream's topics as of the last refresh (empty before the first, or when
        upstream serves Metadata below v10, which has no topic ids)."""
        return self._topics

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """Upstream's ranges from its last ApiVersions answer; empty until first reached."""
        return self._api_versions

    @property
    def failed_attempts(self) -> int:
        """Attempts to reach the upstream that failed since it last answered."""
        return self._failed_attempts

    @property
    def ready(self) -> bool:
        return self.reachable and self._plan_error is None

    @property
    def status(self) -> str:
        if self._plan_error is not None:
            return f"upstream brokers do not fit the listener plan: {self._plan_error}"
        return self._status

    def subscribe(self, callback: Callable[[BrokerChange], None]) -> None:
        """`callback` runs on every change of the broker set, the first discovery included."""
        self._subscribers.append(callback)

    def on_topics_deleted(self, callback: Callable[[Mapping[str, uuid.UUID]], None]) -> None:
        """`callback` hears of the topics (name -> id) the upstream deleted since the last
        read, as kgc sees them go between two reads of its topics."""
        self._on_topics_deleted.append(callback)

    def group_coordinator(self, group_id: str) -> tuple[str, int] | None:
        """The address of the upstream's coordinator of `group_id` as Kafka places it: the
        leader of `__consumer_offsets` partition abs(hashCode) % its partition count, as of
        the last read. None when that read did not show the topic (kgc may not describe it,
        or the upstream reads below Metadata v10) or the partition's leader. It saves the
        FindCoordinator round trip; a leader that moved since answers NOT_COORDINATOR, as
        every broker must to a client that asks the wrong one."""
        leaders = self._offsets_leaders
        if not leaders:
            return None
        broker = self._brokers.get(leaders[partition_for(group_id, len(leaders))])
        return None if broker is None else (broker.host, broker.port)

    def live_broker(self) -> tuple[str, int] | None:
        """The address the control connection last reached, for the bootstrap listener."""
        if not self.reachable or self._control is None or self._control.failure is not None:
            return None
        return self._control.host, self._control.port

    async def request(self, request: Any, response_class: Any) -> Any:
        """One request on the control connection (Metadata for a few topics, say); raises
        `UpstreamUnavailable` while the upstream is not reachable."""
        if not self.reachable or self._control is None or self._control.failure is not None:
            raise UpstreamUnavailable(self.status)
        return await self._request(request, response_class)

    async def find_coordinator(self, key: str, key_type: int) -> FindCoordinatorResponse:
        """The upstream's coordinator of a group (key type 0) or a transactional id (1), asked
        on the control connection; `UpstreamUnavailable` while there is none."""
        response = await self.request(FindCoordinatorRequest[_FIND_COORDINATOR_VERSION](key=key, key_type=key_type),
                                      FindCoordinatorResponse)
        code = ErrorCode(response.error_code)
        if code is not ErrorCode.NONE:
            raise UpstreamUnavailable(f"FindCoordinator for {key!r}: {code.name}")
        return response

    def refresh_soon(self) -> None:
        self._wake.set()

    def learn_topics(self, names: Iterable[str]) -> asyncio.Future | None:
        """A future done when a refresh asked for now has read the upstream's topics; None
        when the topic image names every one of `names` already, when no refresh loop runs,
        or when every name it lacks was asked for within `LEARN_TOPICS_MIN_INTERVAL_S`. A KIP-848 member subscribing to a topic created a moment
        ago is then assigned in its first heartbeat, as Kafka's own coordinator, which
        hears of new topics from the controller, does it."""
        by_name = self._topics.by_name
        unknown = [name for name in names if name not in by_name]
        if not unknown or self._task is None:
            return None
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._next_refresh is None:
            recent = now - LEARN_TOPICS_MIN_INTERVAL_S
            self._asked = {name: at for name, at in self._asked.items() if at > recent}
            if all(name in self._asked for name in unknown):
                return None
            self._next_refresh = loop.create_future()
            self.refresh_soon()
        self._asked.update(dict.fromkeys(unknown, now))
        return self._next_refresh

    async def wait_reachable(self) -> None:
        await self._reached.wait()

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-cluster")

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stops the refresh loop, within `timeout_s` whatever the upstream does."""
        self._closing = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # Python 3.11's wait_for can swallow a cancel that lands as its inner wait
            # completes (a failing control connection wakes the loop at that very moment):
            # `_closing` ends the loop then, and the wait is bounded in case it cannot.
            done, _ = await asyncio.wait([task], timeout=timeout_s)
            if not done:
                log.warning("upstream refresh did not stop within %ss; leaving it", timeout_s)
        await self._drop_control()

    # -- the refresh loop -----------------------------------------------------------

    async def _run(self) -> None:
        backoff_ms = self._backoff_initial_ms
        while not self._closing:
            asked = self._take_refresh_asked()
            try:
                reached = await self._refresh_once()
                if reached:
                    backoff_ms, wait_ms = self._backoff_initial_ms, self.refresh_interval_ms
                else:
                    wait_ms, backoff_ms = backoff_ms, min(backoff_ms * 2, self._backoff_max_ms)
            finally:
                if asked is not None and not asked.done():
                    asked.set_result(None)
            # A failing connection's wake-up during the refresh is spent (the backoff holds);
            # topics asked for during it are read at once.
            self._wake.clear()
            if not reached:
                # A wake-up (a client waiting for the upstream, a forwarded request failing)
                # cuts the backoff short, but attempts stay its first step apart however many
                # clients reconnect.
                await asyncio.sleep(self._backoff_initial_ms / 1000)
                wait_ms -= self._backoff_initial_ms
            if self._next_refresh is not None:
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000)
            except TimeoutError:
                pass

    def _take_refresh_asked(self) -> asyncio.Future | None:
        """The refresh asked for, which the one starting now answers. `learn_topics` may ask
        again while it runs, and `_run` reads the field again after it: set here, not in `_run`,
        so that mypy does not hold the field to this None across the awaits in between."""
        asked, self._next_refresh = self._next_refresh, None
        return asked

    async def _refresh_once(self) -> bool:
        try:
            await self._refresh()
            return True
        except (UpstreamUnavailable, TimeoutError) as exc:
            failure: Exception = exc
        except Exception as exc:  # an answer we could not read: a bug, here or upstream
            log.exception("upstream refresh failed")
            failure = exc
        await self._drop_control()
        self._set_unreachable(failure)
        return False

    async def _refresh(self) -> None:
        control = self._control
        if control is None or control.failure is not None:
            await self._drop_control()
            host, port = self._next_address()
            # A control connection that dies between refreshes wakes the loop at once.
            control = self._control = UpstreamConnection(
                host, port, connect_timeout_ms=self.connect_timeout_ms, on_failure=lambda _: self.refresh_soon(),
                tls=self.tls)
            versions = await self._request(ApiVersionsRequest[0](), ApiVersionsResponse)
            if versions.error_code:
                raise UpstreamUnavailable(f"{host}:{port} refused ApiVersions v0 (error {versions.error_code})")
            self._api_versions = MappingProxyType(
                {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys})
            if self._login is not None:
                await login(self._request, self._login, f"{host}:{port}")
            # After the login: a SASL listener takes one ApiVersions before the handshake.
            if self._api_versions.get(ApiKey.ApiVersions, (0, 0))[1] >= _FEATURES_SINCE:
                self.features = await self._features()
        low, high = self._api_versions.get(ApiKey.Metadata, (0, -1))
        version = min(high, _NEWEST_METADATA)
        if version < max(low, 1):
            raise UpstreamUnavailable(f"upstream serves Metadata {low}-{high}: kgc needs 1-{_NEWEST_METADATA}")
        with_ids = version >= _TOPIC_IDS_SINCE
        metadata = await self._request(MetadataRequest[version](topics=None if with_ids else []), MetadataResponse)
        self.cluster_id = getattr(metadata, "cluster_id", None)
        self._apply([Broker(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in metadata.brokers])
        self._offsets_leaders = _offsets_leaders(metadata.topics)
        if with_ids:
            await self._apply_topics(metadata.topics, version)
        self._set_reachable(control)

    async def _features(self) -> Features:
        """ApiVersions v3 for the feature flags, which v0 (asked first: any broker answers
        it) does not carry."""
        answer = await self._request(ApiVersionsRequest[_FEATURES_SINCE](
            client_software_name="kgc", client_software_version=kgc_version()), ApiVersionsResponse)
        if answer.error_code:
            raise UpstreamUnavailable(f"upstream refused ApiVersions v{_FEATURES_SINCE} (error {answer.error_code})")
        features = Features(
            tuple((f.name, f.min_version, f.max_version) for f in answer.supported_features or ()),
            tuple((f.name, f.min_version_level, f.max_version_level) for f in answer.finalized_features or ()),
            answer.finalized_features_epoch)
        if features != self.features:
            log.info("upstream features: %s (epoch %d)",
                     ", ".join(f"{name}={high}" for name, _, high in features.finalized) or "none", features.epoch)
        return features

    async def _apply_topics(self, topics, version: int) -> None:
        """Takes the upstream's topics as read, once it has told those it deleted since the
        last read apart (a failed request leaves the last read in place, to compare again)."""
        image = TopicImage.of(self._topics.version + 1, (
            TopicMetadata(t.topic_id, t.name, len(t.partitions)) for t in topics
            if t.error_code == 0 and t.name and _has_id(t.topic_id)))
        if self._topics.version != 0 and image.same_topics(self._topics):   # the first read is news
            return
        gone = gone_topics(self._topics, image)
        deleted = await self._deleted(gone, image, version) if gone else {}
        log.info("upstream topics now %d (was %d)", len(image.by_name), len(self._topics.by_name))
        self._topics = image
        for callback in self._on_topics_deleted if deleted else ():
            callback(deleted)

    async def _deleted(self, gone: dict[str, uuid.UUID], image: TopicImage, version: int) -> dict[str, uuid.UUID]:
        """Of the topics gone from the last read, those the upstream deleted: recreated
        under a new id, or unknown by name. A topic only hidden from kgc (its Describe ACL
        revoked) is answered TOPIC_AUTHORIZATION_FAILED by name, and is not taken for deleted."""
        deleted = {name: topic_id for name, topic_id in gone.items() if name in image.by_name}
        asked = sorted(gone.keys() - deleted.keys())
        if asked:
            for t in await self._topics_by_name(asked, version):
                if t.name in gone and (t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                        t.error_code == 0 and _has_id(t.topic_id) and t.topic_id != gone[t.name])):
                    deleted[t.name] = gone[t.name]
            hidden = [name for name in asked if name not in deleted]
            if hidden:
                log.warning("upstream topics %s left kgc's view but are not deleted (no access, or not "
                            "answered): their offsets stay", hidden)
        if deleted:
            log.info("upstream deleted topics %s", sorted(deleted))
        return deleted

    async def topics_by_name(self, names: Iterable[str]) -> list:
        """`_topics_by_name` on the control connection, at the newest Metadata version both
        sides speak; `UpstreamUnavailable` while the upstream is not reachable, or when it
        serves Metadata below v4, which cannot ask without creating the topics."""
        version = min(self._api_versions.get(ApiKey.Metadata, (0, -1))[1], _NEWEST_METADATA)
        if version < _NO_AUTO_CREATION_SINCE:
            raise UpstreamUnavailable(f"upstream serves Metadata up to v{version}: it would create topics asked for")
        if not self.reachable or self._control is None or self._control.failure is not None:
            raise UpstreamUnavailable(self.status)
        return await self._topics_by_name(names, version)

    async def _topics_by_name(self, names: Iterable[str], version: int) -> list:
        """The upstream's entries for the topics `names`, creating none of them."""
        request = MetadataRequest[version]
        answer = await self._request(request(topics=[request.MetadataRequestTopic(name=name) for name in names],
                                             allow_auto_topic_creation=False), MetadataResponse)
        return answer.topics

    async def _request(self, request: Any, response_class: Any) -> Any:
        control = self._control
        if control is None:     # dropped (kgc closing) while a refresh was still under way
            raise UpstreamUnavailable("the control connection is closed")
        return await self._request_on(control, request, response_class)

    async def _request_on(self, connection: UpstreamConnection, request: Any, response_class: Any, *,
                          ahead: bool = False) -> Any:
        correlation_id = next(self._correlation_ids)
        request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
        send = connection.send_ahead if ahead else connection.send
        fut = send(correlation_id, request.encode(header=True), True)
        payload = await asyncio.wait_for(fut, self._request_timeout_ms / 1000)
        return response_class.decode(payload, version=request.API_VERSION, header=True)

    async def own_connection(self, host: str, port: int, *, connect_timeout_ms: int | None = None
                             ) -> UpstreamConnection:
        """A connection upstream for kgc's own requests (not a client's): with kgc's TLS
        and, when configured, kgc's SASL login done, like the control connection."""
        connection = UpstreamConnection(host, port, connect_timeout_ms=connect_timeout_ms or self.connect_timeout_ms,
                                        tls=self.tls)
        if self._login is not None:
            try:
                await login(partial(self._request_on, connection), self._login, f"{host}:{port}")
            except BaseException:
                await connection.close()
                raise
        return connection

    def forwarding_connection(self, host: str, port: int, *, as_kgc: bool) -> UpstreamConnection:
        """A connection carrying one client's requests, with kgc's TLS. With `as_kgc` (every
        mode but SASL passthrough, where the client's own exchange is relayed on it) and kgc's
        SASL identity configured, kgc logs in on it before any of the client's frames is written."""
        prelude = None
        if as_kgc and self._login is not None:
            prelude = partial(self._log_in_ahead, self._login)
        return UpstreamConnection(host, port, connect_timeout_ms=self.connect_timeout_ms, tls=self.tls,
                                  prelude=prelude)

    async def _log_in_ahead(self, credentials: UpstreamLogin, connection: UpstreamConnection) -> None:
        await login(partial(self._request_on, connection, ahead=True), credentials,
                    f"{connection.host}:{connection.port}")

    def _next_address(self) -> tuple[str, int]:
        """Known brokers first (bootstrap addresses may be a load balancer), then bootstrap."""
        candidates = [(b.host, b.port) for b in self._brokers.values()]
        candidates += [a for a in self._bootstrap if a not in candidates]
        address = candidates[self._attempt % len(candidates)]
        self._attempt += 1
        return address

    async def _drop_control(self) -> None:
        control, self._control = self._control, None
        if control is not None:
            await control.close()

    def _set_reachable(self, control: UpstreamConnection) -> None:
        if not self.reachable:
            log.info("upstream reachable at %s:%d (cluster %s, brokers %s)", control.host,
                     control.port, self.cluster_id, sorted(self._brokers))
        self.reachable = True
        self._failed_attempts = 0
        self._last_failure = None
        self._status = f"upstream reachable: {len(self._brokers)} broker(s), cluster {self.cluster_id}"
        self._reached.set()

    def _set_unreachable(self, exc: Exception) -> None:
        reason = str(exc) or type(exc).__name__
        if reason != self._last_failure:  # once per distinct reason, not once per retry
            log.warning("upstream unreachable, retrying with backoff: %s", reason)
        self.reachable = False
        self._failed_attempts += 1
        self._last_failure = reason
        self._status = f"upstream unreachable after {self._failed_attempts} attempt(s): {reason}"
        self._reached.clear()

    # -- the broker set -------------------------------------------------------------

    def observe_brokers(self, brokers: Iterable[Broker]) -> None:
        """Learns from a Metadata response the gateway passed through."""
        self._apply(list(brokers))

    def _apply(self, brokers: list[Broker]) -> None:
        new = {b.node_id: b for b in brokers}
        if new == self._brokers:
            self._plan_error = None
            return
        if self._plan is not None:
            try:
                self._plan.check(new)
            except ListenerPlanError as exc:
                if self._plan_error != str(exc):
                    log.error("refusing upstream broker set %s: %s", sorted(new), exc)
                self._plan_error = str(exc)
                return
        self._plan_error = None
        change = BrokerChange(MappingProxyType(new), frozenset(new.keys() - self._brokers.keys()),
                              frozenset(self._brokers.keys() - new.keys()))
        self._brokers = change.brokers
        log.info("upstream brokers now %s (added %s, removed %s)", sorted(new), sorted(change.added),
                 sorted(change.removed))
        for callback in self._subscribers:
            callback(change)


def _offsets_leaders(topics) -> tuple[int, ...]:
    """The leader of each `__consumer_offsets` partition by index; () unless the read lists
    the topic with every partition from 0 up."""
    for topic in topics:
        if topic.name == OFFSETS_TOPIC and topic.error_code == 0:
            leaders = {p.partition_index: p.leader_id for p in topic.partitions}
            if sorted(leaders) == list(range(len(leaders))):
                return tuple(leaders[i] for i in range(len(leaders)))
    return ()


def _has_id(topic_id: uuid.UUID | None) -> bool:
    return topic_id is not None and topic_id.int != 0
