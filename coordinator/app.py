"""Wiring only: config → log store → partition runtimes → service → listeners, plus the
HTTP server, the online cleaner and the metrics sampler.

The service's concrete classes meet here: each layer below takes its collaborators as
arguments (the runtime a shard factory, the service a runtime, the dispatcher a service).

Graceful stop (`KgcApp.stop`, on the first SIGTERM or SIGINT), in order:
1. /readyz turns 503 ("shutting down"); listeners stop accepting.
2. Every connection stops reading; requests already read are still answered.
3. The runtime closes: queued events run and their writes become durable, then parked
   requests (JoinGroup, SyncGroup) are answered COORDINATOR_NOT_AVAILABLE, so clients
   look for the coordinator again instead of waiting out their timeouts.
4. Responses owed (forwarded ones included) are written, for at most
   `shutdown_timeout_ms`; then the connections close.
5. The upstream control connection closes, and the store flushes, fsyncs and closes
   every segment, so the next start finds whole batches only and recovers nothing.
6. The HTTP server stops last.
A second signal exits at once (`coordinator.commands.process`), stopping the embedded broker by PID first.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.gateway.cluster import LEARN_TOPICS_WAIT_S, BrokerChange, UpstreamCluster
from coordinator.gateway.gateway import Gateway
from coordinator.gateway.log_ends import LogEnds, keep_fresh
from coordinator.gateway.login import UpstreamLogin
from coordinator.gateway.offsets_topic import OffsetsTopic
from coordinator.gateway.plan import ListenerPlan
from coordinator.gateway.rewrite import Broker
from coordinator.gateway.topic_partitions import TopicPartitions
from coordinator.gateway.upstream_acls import UpstreamAcls
from coordinator.gateway.upstream_groups import UpstreamGroups
from coordinator.gateway.upstream_topic import TopicRefused
from coordinator.group.shard import group_shard_factory
from coordinator.group.topics import NO_TOPICS, TopicImage
from coordinator.http.groups import committed_offsets
from coordinator.http.server import HttpServer
from coordinator.net.authentication import SaslSettings
from coordinator.net.committed_topics import CommittedTopics
from coordinator.net.connection_limits import ConnectionsPerIp, IdleLimit
from coordinator.net.dispatch import Dispatcher
from coordinator.net.local_answers import LocalAnswers
from coordinator.net.passthrough import PassthroughSettings
from coordinator.net.server import Listener
from coordinator.net.topic_ids import TopicIds
from coordinator.node import CoordinatorNode
from coordinator.periodic import run_every
from coordinator.process_split import ProcessSplit
from coordinator.replicated.ownership import Instance, Ownership
from coordinator.replicated.state_topic import StateTopic
from coordinator.replicated.store import ReplicatedLogStore
from coordinator.runtime.partition_state import PartitionState
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.security.acl import AclSource, FileAuthorizer
from coordinator.security.credentials import CredentialStore
from coordinator.security.principal import PrincipalMapper
from coordinator.security.tls import ServerTls, ServerTlsFiles, client_context
from coordinator.service.adoption import Adoption
from coordinator.service.cleaner_schedule import CleanerSchedule
from coordinator.service.deleted_topics import DeletedTopics
from coordinator.service.group_coordinator import GroupCoordinatorService
from coordinator.service.group_stats import GroupStatsSampler
from coordinator.settings import DEFAULT_NODE_ID, ConfigError, ServerConfig
from coordinator.txn.commits import COMMIT_FOLLOW_MS, TransactionalCommits
from coordinator.txn.participant import ParticipantTopic
from coordinator.txn.tailer import MarkerTailer
from protocol.api_keys import TXN_OFFSET_COMMIT_VERSIONS, local_versions
from storage.api import LogStore, StorageError
from storage.clock import wall_clock_ms
from storage.dir_lock import DataDirInUse
from storage.file_store import FileLogStore, NoPartitionOpens
from storage.memory_store import MemoryLogStore

log = logging.getLogger(__name__)

DRAIN_POLL_S = 0.01
BACKGROUND_STOP_S = 1.0  # a background job that ignores its cancel is left behind after this
STATE_WAIT_LOG_S = 10.0  # how often a start waiting for the replicated store's upstream says so

T = TypeVar("T")


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class CannotStart(Exception):
    """A listener could not bind or the data dir could not be opened: the message is the
    one line `kgc serve` prints."""


def _reason(exc: OSError) -> str:
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


def _needed(value: T | None, setting: str) -> T:
    """A setting `settings.check` requires where this reads it: None here is a config that
    was never checked."""
    if value is None:
        raise ConfigError(f"{setting} is not set")
    return value


def started(value: T | None, what: str) -> T:
    """What `KgcApp.start` makes, read where it must be made already: by a callback start
    wires, or by its caller once start has returned."""
    if value is None:
        raise RuntimeError(f"{what} is missing: KgcApp.start has not made it")
    return value


async def _committed_offsets(runtime: CoordinatorRuntime) -> dict[str, dict[tuple[str, int], int]]:
    found: dict[str, dict[tuple[str, int], int]] = {}
    outcomes = await asyncio.gather(*(runtime.read(p, committed_offsets) for p in range(runtime.num_partitions)),
                                    return_exceptions=True)
    for outcome in outcomes:
        if not isinstance(outcome, BaseException):   # a partition not active now is skipped this time
            found.update(outcome)
    return found


class KgcApp:
    def __init__(self, config: ServerConfig, *, clock: Callable[[], int] = wall_clock_ms):
        self.config = config
        self._clock = clock
        self.store: LogStore | None = None
        self._state_cluster: UpstreamCluster | None = None     # the replicated store's own connections
        self.ownership: Ownership | None = None
        # Who owns which partition when this is one of several: processes (fixed) or instances.
        self.split = self._process_split()
        self._placement: Ownership | ProcessSplit | None = self.split
        self._node_id = config.node_id
        self.runtime: CoordinatorRuntime | None = None
        self.service: GroupCoordinatorService | None = None
        self.listeners: list[Listener] = []
        self.cluster: UpstreamCluster | None = None
        self.upstream_groups: UpstreamGroups | None = None
        self.adoption: Adoption | None = None
        self.http: HttpServer | None = None
        self.sampler: GroupStatsSampler | None = None
        self.cleaner: CleanerSchedule | None = None
        self.log_ends: LogEnds | None = None
        self.warnings: list[str] = []   # what /readyz tells even when ready (the embedded broker's memory storage)
        self._lag_task: asyncio.Task | None = None
        self._txn_task: asyncio.Task | None = None
        self.participant: ParticipantTopic | None = None
        self.transactions: TransactionalCommits | None = None
        self.deleted_topics: DeletedTopics | None = None
        self._lag_stopping = asyncio.Event()
        self.stopping = False
        self._dispatcher: Dispatcher | None = None
        # Decodes large request frames and encodes their answers off the loop (net/dispatch.py);
        # one thread: the GIL runs one at a time anyway, and the loop's share is what matters.
        self._codec_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgc-codec")
        self._plan: ListenerPlan | None = None
        self._broker_listeners: dict[int, Listener] = {}
        # Kafka counts a client's connections per broker; kgc's listeners are one broker to it.
        self._connections_per_ip = ConnectionsPerIp(config.max_connections_per_ip,
                                                    dict(config.max_connections_per_ip_overrides))
        self.tls: ServerTls | None = None
        self.upstream_acls: UpstreamAcls | None = None
        self._tls_stop = asyncio.Event()
        self._tls_reloader: asyncio.Task | None = None

    def _process_split(self) -> ProcessSplit | None:
        cfg = self.config
        if cfg.processes == 1:
            return None
        return ProcessSplit.of(_needed(cfg.process_index, "process_index"), cfg.processes, cfg.group.num_partitions,
                               node_id=cfg.node_id, host=cfg.advertised, port=cfg.port,
                               broker_port_base=cfg.broker_port_base, broker_ports=tuple(cfg.broker_ports))

    def _make_store(self) -> LogStore:
        cfg = self.config
        if cfg.store == "replicated":
            if cfg.data_dir is not None:
                log.info("store replicated: data_dir %s is not used", cfg.data_dir)
            self._state_cluster = UpstreamCluster(cfg.upstream, tls=self._upstream_tls(), login=self._upstream_login())
            topic = StateTopic(self._state_cluster, cfg.state_topic, cfg.group.num_partitions,
                               replication_factor=cfg.state_topic_replication_factor,
                               min_insync_replicas=cfg.state_topic_min_insync_replicas)
            return ReplicatedLogStore(topic, transactional_id_prefix=cfg.state_topic)
        if cfg.data_dir is None:
            log.warning("no data dir: group state lives in memory and is lost on exit")
            return MemoryLogStore(num_partitions=cfg.group.num_partitions)
        return FileLogStore(cfg.data_dir, num_partitions=cfg.group.num_partitions, fsync=cfg.fsync,
                            partitions=None if self.split is None else self.split.owned,
                            segment_bytes=cfg.segment_bytes, delete_retention_ms=cfg.delete_retention_ms,
                            clock=self._clock, commit_observer=metrics.LOG_OBSERVER)

    async def start(self) -> None:
        cfg = self.config
        if cfg.http_port is not None:
            # First: liveness answers while the log opens, readiness says it is not ready.
            tls, token = self._http_security()
            http_port = cfg.http_port + self.split.index if self.split is not None and cfg.http_port else cfg.http_port
            self.http = HttpServer(self, cfg.http_host, http_port, tls=tls, token=token)
            try:
                await self.http.start()
            except OSError as exc:
                raise CannotStart(f"cannot serve HTTP on {cfg.http_host}:{cfg.http_port}: {_reason(exc)}; set "
                                   "http_port (--http-port, KGC_HTTP_PORT; 0: any free port) or http_host") from None
        self._start_tls()
        store = self.store = self._make_store()
        try:
            if self._state_cluster is not None:
                await self._reach_state_topic(self._state_cluster)
            await store.open()
        except OSError as exc:
            raise CannotStart(f"cannot open the data dir {cfg.data_dir}: {_reason(exc)}; set data_dir (--data-dir, "
                              "KGC_DATA_DIR) to a directory kgc may write") from None
        except NoPartitionOpens as exc:
            # A coordinator that can hold no group would only answer NOT_COORDINATOR.
            raise CannotStart(f"cannot use the data dir {cfg.data_dir}: {exc}; set data_dir (--data-dir, "
                              "KGC_DATA_DIR) to a directory kgc may write") from None
        except DataDirInUse as exc:
            # Two processes appending to one partition's segments would corrupt it.
            raise CannotStart(f"cannot use the data dir {cfg.data_dir}: {exc.reason}; stop the other kgc first, "
                              "or set data_dir (--data-dir, KGC_DATA_DIR) to another directory") from None
        except (StorageError, TopicRefused) as exc:
            raise CannotStart(f"cannot use the state topic {cfg.state_topic} upstream: {exc}") from None
        # perf_counter times the KIP-848 assignors for the metrics (nothing decides by it).
        shards = group_shard_factory(cfg.group, self._clock, new_member_id, self._topics, stopwatch=time.perf_counter)
        # Replicated: the partitions this instance owns come from the ownership group, later.
        owned = () if cfg.store == "replicated" else None if self.split is None else self.split.owned
        runtime = self.runtime = CoordinatorRuntime(store, cfg.group.num_partitions, clock=self._clock,
                                                    shard_factory=shards, owned=owned,
                                                    answer_timeout_s=cfg.offsets_commit_timeout_ms / 1000)
        await runtime.start()
        port = cfg.port if self.split is None else self.split.me.port
        try:
            bootstrap = self._listener(port, None)
        except OSError as exc:
            raise CannotStart(f"cannot listen for Kafka clients on {cfg.host}:{port}: {_reason(exc)}; set port "
                               "(--port, KGC_PORT; 0: any free port) or host") from None
        self._node_id = self._coordinator_node_id(bootstrap.port)
        node = CoordinatorNode(self._node_id, cfg.advertised, bootstrap.port)
        gateway = self._start_gateway(bootstrap.port) if cfg.upstream else None
        adoption = None
        if self.cluster is not None and cfg.adopt_from_upstream:
            self.upstream_groups = UpstreamGroups(self.cluster)
            adoption = self.adoption = Adoption(runtime, self.upstream_groups, clock=self._clock,
                                                default_wait_ms=cfg.group.consumer_session_timeout_ms)
        versions = dict(local_versions(cfg.min_group_api_versions))
        note_topics = None
        if self.cluster is not None and cfg.delete_offsets_of_deleted_topics:
            self.deleted_topics = DeletedTopics(runtime)
            self.cluster.on_topics_deleted(self.deleted_topics.on_deleted)
            note_topics = self.cluster.learn_topics
        if self.cluster is not None:
            # Exactly-once clients: the upstream's transaction coordinator decides (coordinator/txn).
            self.participant = ParticipantTopic(self.cluster, cfg.group.num_partitions)
            # With several instances a client stuck on a dead owner (librdkafka#5511) is told
            # to look again only once the others have taken its partitions over.
            follow_ms = COMMIT_FOLLOW_MS + (cfg.ownership_session_timeout_ms if cfg.store == "replicated" else 0)
            self.transactions = TransactionalCommits(runtime, self.participant,
                                                     partial(MarkerTailer, self.participant),
                                                     commit_follow_ms=follow_ms)
            versions[ApiKey.TxnOffsetCommit] = TXN_OFFSET_COMMIT_VERSIONS
        if isinstance(store, ReplicatedLogStore):
            me = Instance(node.node_id, node.host, node.port, cfg.broker_port_base, tuple(cfg.broker_ports))
            ownership = self._placement = self.ownership = Ownership(
                store.topic.cluster, f"{cfg.state_topic}.owners", me, cfg.group.num_partitions, self._own,
                session_timeout_ms=cfg.ownership_session_timeout_ms)
            store.owns = ownership.holds
            runtime.serving = ownership.serving
        if gateway is not None and self._placement is not None:
            gateway.address_for = self.broker_address
            gateway.coordinators = self._coordinator_nodes
            if gateway.offsets_topic is not None:
                gateway.offsets_topic.owner_node = self._owner_node
                gateway.offsets_topic.serves = self._serves_offsets
        self.service = GroupCoordinatorService(runtime, node, adoption, self.transactions, self._learn_topics,
                                               locate=self._locate if self._placement is not None else None,
                                               note_topics=note_topics)
        answers = LocalAnswers(node, gateway, versions, sasl_enabled=cfg.sasl)
        self._dispatcher = Dispatcher(self.service, answers, gateway, sasl=self._sasl_settings(),
                                      principals=PrincipalMapper(cfg.ssl_principal_mapping_rules),
                                      authorizer=self._authorizer(), codec_pool=self._codec_pool,
                                      topic_ids=TopicIds(self._topics, self._topic_id_unknown),
                                      transactions=self.transactions, committed_topics=self._committed_topics())
        await bootstrap.serve(self._dispatcher)
        if self.ownership is not None:
            self.ownership.start()
        if self.cluster is not None:
            self.cluster.start()
            if self.upstream_acls is not None:
                self.upstream_acls.start()
            log_ends = self.log_ends = LogEnds(self.cluster)
            self._lag_task = asyncio.get_running_loop().create_task(
                self._keep_log_ends_fresh(runtime, self.cluster, log_ends), name="log-ends")
            if self.participant is not None and self.transactions is not None:
                self._txn_task = asyncio.get_running_loop().create_task(
                    self._resume_transactions(self.cluster, self.participant, self.transactions), name="txn-resume")
        if isinstance(store, FileLogStore) and cfg.cleaner_interval_ms > 0:
            self.cleaner = CleanerSchedule(store, runtime, cfg.cleaner_interval_ms)
            self.cleaner.start()
        self.sampler = GroupStatsSampler(runtime, cfg.metrics_sample_interval_ms, self.cluster)
        self.sampler.start()

    def _committed_topics(self) -> CommittedTopics | None:
        """Commits are checked against the upstream's topics, as Kafka checks them; with
        no upstream (standalone) there is nothing to check against."""
        if self.cluster is None:
            return None
        partitions = TopicPartitions(self.cluster)
        return CommittedTopics(partitions.known, partitions.ask)

    def _coordinator_node_id(self, port: int) -> int:
        """Instances that share the partitions need node ids of their own (clients key their
        coordinator connections by it): unless one is set, each takes one from its address."""
        cfg = self.config
        if self.split is not None:
            return self.split.me.node_id
        if cfg.store != "replicated" or cfg.node_id != DEFAULT_NODE_ID:
            return cfg.node_id
        return DEFAULT_NODE_ID + zlib.crc32(f"{cfg.advertised}:{port}".encode()) % 100_000_000

    def _placed(self) -> Ownership | ProcessSplit:
        if self._placement is None:
            raise RuntimeError("the ownership is missing: KgcApp.start has not made it")
        return self._placement

    def _locate(self, group_id: str) -> CoordinatorNode | None:
        # A lapsed instance's map may be stale: COORDINATOR_NOT_AVAILABLE, and the client asks again.
        placement = self._placed()
        owner = placement.owner(group_id) if placement.serving() else None
        return None if owner is None else CoordinatorNode(owner.node_id, owner.host, owner.port)

    def _coordinator_nodes(self) -> tuple[Broker, ...]:
        """Every live instance's or process's coordinator node, this one's first: a
        FindCoordinator may name any of them, and clients keep only brokers Metadata lists."""
        own = started(self._plan, "the listener plan").coordinator
        members = self._placed().members
        return (own, *(Broker(i.node_id, i.host, i.port) for i in members if i.node_id != own.node_id))

    def _owner_node(self, partition: int) -> int | None:
        owner = self._placed().owners.get(partition)
        return None if owner is None else owner.node_id

    def _serves_offsets(self, partition: int) -> bool:
        """Whether this instance answers a read of `__consumer_offsets` partition `partition`:
        it owns it and has loaded it (what it holds in memory is the whole partition)."""
        return (self._placed().holds(partition)
                and started(self.runtime, "the runtime").partition_state(partition) is PartitionState.ACTIVE)

    def broker_address(self, node_id: int) -> tuple[str, int]:
        """Where clients reach upstream node `node_id` (several instances or processes): the
        listener of the instance every instance names for it; this one's own before the first
        generation, and always with processes (they share the broker listeners' ports)."""
        placement = self._placed()
        instance = placement.broker_instance(node_id) if node_id != self._node_id else None
        if instance is None:
            return started(self._plan, "the listener plan").listener_address(node_id)
        return instance.host, instance.broker_port(node_id)

    async def _own(self, partitions: frozenset[int]) -> None:
        """The ownership's answer: release what moved away (drained), load what came here."""
        runtime = started(self.runtime, "the runtime")
        # A partition that failed here (fenced while this instance was paused, say) and is
        # given back is taken again, not left failed.
        failed = {p for p in partitions & runtime.owned if runtime.partition_state(p) is PartitionState.FAILED}
        moved = (runtime.owned - partitions) | failed
        await asyncio.gather(*(runtime.release(p) for p in moved))
        if self.transactions is not None:
            await asyncio.gather(*(self.transactions.forget(p) for p in moved))
        gained = sorted(partitions - runtime.owned)
        for p in gained:
            runtime.acquire(p)
        await runtime.wait_loaded(gained)
        if self.transactions is not None:
            # Undecided transactions of a partition taken over: tailed here from now on.
            for p in gained:
                if runtime.partition_state(p) is PartitionState.ACTIVE:
                    await self.transactions.resume_partition(p)

    async def _reach_state_topic(self, cluster: UpstreamCluster) -> None:
        """The replicated store reads every partition before kgc serves: wait for the upstream."""
        cluster.start()
        while True:
            try:
                await asyncio.wait_for(cluster.wait_reachable(), STATE_WAIT_LOG_S)
                return
            except TimeoutError:
                log.warning("store replicated: waiting for the upstream cluster (%s)", cluster.status)

    def _http_security(self) -> tuple[ssl.SSLContext | None, str | None]:
        """The HTTP server's TLS context and bearer token, each None when not configured."""
        cfg = self.config
        tls = token = None
        if cfg.http_tls_cert_file is not None:
            key_file = _needed(cfg.http_tls_key_file, "http_tls_key_file")
            tls = ServerTls(ServerTlsFiles(cfg.http_tls_cert_file, key_file)).context
        if cfg.http_auth_token_file is not None:
            with open(cfg.http_auth_token_file) as f:
                token = f.read().strip()
        return tls, token

    def _start_tls(self) -> None:
        """The listeners' TLS (files checked now: a bad one stops the start), reloaded on change."""
        cfg = self.config
        if not cfg.tls:
            return
        tls = self.tls = ServerTls(ServerTlsFiles(_needed(cfg.tls_cert_file, "tls_cert_file"),
                                                  _needed(cfg.tls_key_file, "tls_key_file"),
                                                  cfg.tls_client_ca_file, cfg.tls_client_auth))
        if cfg.tls_reload_interval_ms > 0:
            async def reload() -> None:
                tls.reload_if_changed()
            self._tls_reloader = asyncio.get_running_loop().create_task(
                run_every(cfg.tls_reload_interval_ms, self._tls_stop, reload, "TLS certificate reload"))

    def _upstream_login(self) -> UpstreamLogin | None:
        cfg = self.config
        if cfg.upstream_sasl_mechanism is None:
            return None
        with open(_needed(cfg.upstream_sasl_password_file, "upstream_sasl_password_file")) as f:
            password = f.read().rstrip("\n")
        username = _needed(cfg.upstream_sasl_username, "upstream_sasl_username")
        return UpstreamLogin(cfg.upstream_sasl_mechanism, username, password)

    def _upstream_tls(self) -> ssl.SSLContext | None:
        cfg = self.config
        if cfg.upstream_security_protocol != "ssl":
            return None
        if not cfg.upstream_tls_check_hostname:
            log.warning("upstream_tls_check_hostname is off: any certificate the CA signed passes as the upstream")
        return client_context(cfg.upstream_tls_ca_file, cfg.upstream_tls_cert_file, cfg.upstream_tls_key_file,
                              check_hostname=cfg.upstream_tls_check_hostname)

    def _authorizer(self) -> AclSource | None:
        cfg = self.config
        if cfg.authorizer == "none":
            if cfg.sasl or cfg.tls_client_auth != "none":
                log.warning("authorizer none: every authenticated client may use every group")
            return None
        if cfg.authorizer == "upstream":
            if self.cluster is None:
                raise ConfigError("authorizer upstream reads the upstream cluster's ACLs: set upstream")
            self.upstream_acls = UpstreamAcls(self.cluster, frozenset(cfg.super_users),
                                              cfg.allow_everyone_if_no_acl_found, cfg.acl_refresh_interval_ms)
            return self.upstream_acls
        return FileAuthorizer(_needed(cfg.acl_file, "acl_file"), frozenset(cfg.super_users),
                              cfg.allow_everyone_if_no_acl_found)

    def _sasl_settings(self) -> SaslSettings | PassthroughSettings | None:
        cfg = self.config
        if not cfg.sasl:
            return None
        if cfg.sasl_mode == "passthrough":
            return PassthroughSettings(cfg.sasl_mechanisms, cfg.sasl_oauthbearer_sub_claim_name)
        if cfg.security_protocol == "sasl_plaintext" and "PLAIN" in cfg.sasl_mechanisms:
            log.warning("PLAIN over sasl_plaintext: passwords cross the network in clear text")
        credentials = CredentialStore(_needed(cfg.sasl_credentials_file, "sasl_credentials_file"))
        return SaslSettings(mechanisms=cfg.sasl_mechanisms, credentials=credentials,
                            max_reauth_ms=cfg.sasl_max_reauth_ms, failure_delay_ms=cfg.sasl_failure_delay_ms)

    async def _keep_log_ends_fresh(self, runtime: CoordinatorRuntime, cluster: UpstreamCluster,
                                   log_ends: LogEnds) -> None:
        await runtime.wait_loaded()
        await cluster.wait_reachable()
        await keep_fresh(log_ends, partial(_committed_offsets, runtime), self.config.lag_refresh_interval_ms,
                         self._lag_stopping, partial(self._publish_lag, log_ends))

    def _publish_lag(self, log_ends: LogEnds, committed: Mapping[str, Mapping[tuple[str, int], int]],
                     reached: bool) -> None:
        rows = [metrics.LagRow(group, topic, partition, log_ends.end_of((topic, partition)).lag(offset).value)
                for group, by_partition in committed.items() for (topic, partition), offset in by_partition.items()]
        metrics.consumer_lag(rows, per_partition=self.config.lag_metrics_per_partition)
        metrics.log_ends_refreshed(reached)

    def _topics(self) -> TopicImage:
        """The upstream's topics for KIP-848 groups; none in standalone mode."""
        return self.cluster.topics if self.cluster is not None else NO_TOPICS

    def _learn_topics(self, names: Iterable[str]) -> Awaitable[Any] | None:
        """What a KIP-848 heartbeat naming a topic kgc has not seen waits for: one refresh of
        the upstream's topics, at most `LEARN_TOPICS_WAIT_S`."""
        asked = self.cluster.learn_topics(names) if self.cluster is not None else None
        return None if asked is None else asyncio.wait([asked], timeout=LEARN_TOPICS_WAIT_S)

    def _topic_id_unknown(self) -> None:
        """A client named a topic id kgc does not know: perhaps a topic newer than kgc's view."""
        if self.cluster is not None:
            self.cluster.refresh_soon()

    def _listener(self, port: int, node_id: int | None) -> Listener:
        """A bound listener (bind errors raise here, before anything is served)."""
        cfg = self.config
        # The processes of one kgc share the broker listeners' ports (coordinator/process_split.py).
        listener = Listener(cfg.host, port, listener_node_id=node_id, shared=node_id is not None and self.split is not None,
                            max_frame_bytes=cfg.max_frame_bytes, max_in_flight=cfg.max_in_flight, tls=self.tls,
                            login_frame_bytes=cfg.sasl_server_max_receive_size if cfg.sasl else None,
                            per_ip=self._connections_per_ip, idle=IdleLimit(cfg.connections_max_idle_ms),
                            backlog=cfg.socket_listen_backlog_size)
        listener.bind()
        self.listeners.append(listener)
        return listener

    def _start_gateway(self, bootstrap_port: int) -> Gateway:
        cfg = self.config
        self._plan = ListenerPlan(coordinator_node_id=self._node_id, advertised_host=cfg.advertised,
                                  bootstrap_port=bootstrap_port, broker_port_base=cfg.broker_port_base,
                                  port_map=dict(cfg.broker_ports))
        self.cluster = UpstreamCluster(cfg.upstream, plan=self._plan, tls=self._upstream_tls(),
                                       login=self._upstream_login())
        self.cluster.subscribe(self._on_brokers_changed)
        # Under SASL passthrough each client logs in upstream itself, on its own connection;
        # otherwise kgc does, as itself, on every connection it opens (when it has an identity).
        return Gateway(self.cluster, self._plan, OffsetsTopic(self.store, cfg.group.num_partitions),
                       as_kgc=not (cfg.sasl and cfg.sasl_mode == "passthrough"))

    def _on_brokers_changed(self, change: BrokerChange) -> None:
        """A listener per upstream broker, opened as brokers appear. Listeners of brokers
        that leave stay open: clients holding old metadata get a closed connection there
        and refresh, instead of a refused connect they might retry forever."""
        if self.stopping:
            return
        for node_id in sorted(change.added - self._broker_listeners.keys()):
            try:
                listener = self._listener(started(self._plan, "the listener plan").listener_port(node_id), node_id)
            except (OSError, ValueError) as exc:
                log.error("cannot open a listener for upstream broker %d: %s", node_id, exc)
                continue
            self._broker_listeners[node_id] = listener
            asyncio.get_running_loop().create_task(listener.serve(started(self._dispatcher, "the dispatcher")))

    async def _stop_lag(self) -> None:
        self._lag_stopping.set()
        task, self._lag_task = self._lag_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task], timeout=BACKGROUND_STOP_S)
        if self.log_ends is not None:
            await self.log_ends.close()

    @property
    def port(self) -> int:
        return self.listeners[0].port

    @property
    def broker_ports(self) -> dict[int, int]:
        """Upstream broker node id -> the port of kgc's listener for it, as opened so far."""
        return {node: listener.port for node, listener in self._broker_listeners.items()}

    async def _resume_transactions(self, cluster: UpstreamCluster, participant: ParticipantTopic,
                                   transactions: TransactionalCommits) -> None:
        """Once upstream answers: the participant topic exists (created if missing), and
        every group partition's undecided transactions are tailed again."""
        backoff_s = 0.5
        while True:
            await cluster.wait_reachable()
            try:
                await participant.ensure()
                await transactions.resume()
                return
            except Exception as exc:
                log.warning("exactly-once support not ready (retrying): %s", exc)
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 10.0)

    async def _stop_transactions(self) -> None:
        task, self._txn_task = self._txn_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.transactions is not None:
            self.transactions.close()
            await self.transactions.tailer.close()
        if self.participant is not None:
            await self.participant.close()

    async def stop(self) -> None:
        self.stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout_ms / 1000
        for listener in self.listeners:
            await listener.stop_accepting()
        for listener in self.listeners:
            listener.drain_connections()
        if self.ownership is not None:
            await self.ownership.stop()
        for background in (self.sampler, self.cleaner):
            if background is not None:
                await background.close()
        await self._stop_lag()
        await self._stop_transactions()
        if self.deleted_topics is not None:
            await self.deleted_topics.close()
        self._tls_stop.set()
        if self._tls_reloader is not None:
            await self._tls_reloader
        if self.runtime is not None:
            await self.runtime.close()
        while any(listener.in_flight for listener in self.listeners) and loop.time() < deadline:
            await asyncio.sleep(DRAIN_POLL_S)
        unanswered = sum(listener.in_flight for listener in self.listeners)
        if unanswered:
            log.warning("closing connections with %d responses still owed after %d ms", unanswered,
                        self.config.shutdown_timeout_ms)
        for listener in self.listeners:
            listener.close_connections()
        self._codec_pool.shutdown(wait=False, cancel_futures=True)
        if self.adoption is not None:
            self.adoption.close()
        if self.upstream_groups is not None:
            await self.upstream_groups.close()
        if self.upstream_acls is not None:
            await self.upstream_acls.close()
        if self.cluster is not None:
            await self.cluster.close()
        if self.store is not None:
            await self.store.close()
            log.info("log flushed and closed")
        if self._state_cluster is not None:
            await self._state_cluster.close()
        if self.http is not None:
            await self.http.stop()
