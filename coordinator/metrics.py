"""Every Prometheus metric kgc exports, and the small recorders the rest of kgc calls.

Metric objects live here and nowhere else; the network layer, runtime, storage (through
`LOG_OBSERVER`, so storage imports nothing from the coordinator), cleaner and gateway
call one recorder per event. The group state machine never imports this module: group
counts, members and rebalances are sampled from the shards (`coordinator.service.group_stats`).

The per-request metrics (requests, their latency, response error codes, committed
offsets) are plain counters kept by `RequestMetrics`, one per (api, version), and the
log's histograms, observed per append, are `_Histogram`s; collectors read both at scrape
time: prometheus-client's `inc`/`observe` per request was a
visible share of a Heartbeat's CPU (docs/benchmarks/notes.md, "Heartbeat request path"). Only the event-loop
thread counts them. Label values come from closed sets: an API key kgc has no schema for
is api "unknown", a version outside the range the protocol defines for its API
(`protocol.api_keys.known_versions`) is version "unknown", and such requests share one
tally per label set, so a client sending garbage grows neither the series nor memory.

| metric | type | labels | what |
|---|---|---|---|
| kgc_requests_total | counter | api, version | requests received (local and forwarded) |
| kgc_request_duration_seconds | histogram | api, version | from the request's arrival to its response being ready |
| kgc_response_errors_total | counter | api, error | error codes in responses of the APIs kgc serves, NONE included (Kafka's ErrorsPerSec) |
| kgc_connections | gauge | | open client connections |
| kgc_connections_accepted_total | counter | | client connections accepted |
| kgc_offsets_committed_total | counter | | partition offsets committed and acknowledged |
| kgc_offsets_deleted_with_topics_total | counter | | offsets deleted because the upstream deleted their topic |
| kgc_groups | gauge | state | groups per classic group state (sampled) |
| kgc_group_members | gauge | | members of all groups (sampled) |
| kgc_group_rebalances_total | counter | | completed join phases: generation bumps (sampled) |
| kgc_group_rebalance_duration_seconds | histogram | | PreparingRebalance entered until Stable or Empty (sampled) |
| kgc_partitions | gauge | state | `__consumer_offsets` partitions per runtime state |
| kgc_partition_load_duration_seconds | histogram | | time to replay a partition from the log |
| kgc_partition_loaded_records_total | counter | | records read by loads (replayed or superseded) |
| kgc_partition_failures_total | counter | | partitions failed (and reloaded) after a write error |
| kgc_operation_failures_total | counter | | operations (requests, timers) that failed alone and had their group reset |
| kgc_log_append_duration_seconds | histogram | | per batch, from append to durable |
| kgc_log_write_duration_seconds | histogram | | per group commit, the write call(s) |
| kgc_log_fsync_duration_seconds | histogram | | per fsync of a partition's active segment |
| kgc_log_group_commit_batches | histogram | | batches made durable by one group commit |
| kgc_log_group_commit_bytes | histogram | | bytes written by one group commit |
| kgc_log_cleaner_passes_total | counter | | passes of the online cleaner |
| kgc_log_cleaner_pass_duration_seconds | histogram | | duration of a cleaner pass |
| kgc_log_cleaner_bytes_removed_total | counter | | segment bytes the cleaner compacted away |
| kgc_upstream_bytes_total | counter | direction | bytes to ("sent") and from ("received") upstream brokers |
| kgc_upstream_request_duration_seconds | histogram | api | forwarded request to upstream response |
| kgc_upstream_reachable | gauge | | 1 when the upstream cluster answers its control connection |
| kgc_upstream_brokers | gauge | | upstream brokers known |
| kgc_build_info | gauge | version, python | always 1: which kgc runs |
| kgc_authentications_total | counter | mechanism, outcome | SASL exchanges: success, reauthenticated, failure, unsupported_mechanism |
| kgc_sasl_sessions_expired_total | counter | | connections closed because their SASL session lifetime passed |
| kgc_authorization_denials_total | counter | api | requests (or parts of them) refused by the authorizer |
| kgc_consumer_lag | gauge | group, topic | log end minus committed offset, summed over the partitions; absent while any one's lag is unknown |
| kgc_consumer_lag_unknown_partitions | gauge | group, topic | partitions whose lag is unknown |
| kgc_consumer_lag_partition | gauge | group, topic, partition | per partition (setting lag_metrics_per_partition) |
| kgc_consumer_lag_series_dropped | gauge | | lag series left out past MAX_LAG_SERIES per family |
| kgc_log_ends_refreshed_timestamp_seconds | gauge | | when the upstream last answered the periodic lag refresh for every partition (no sample before the first, nor standalone); the lag series are `time() -` this old at most |
| kgc_log_end_refresh_failures_total | counter | | periodic lag refreshes that could not reach the upstream or a partition's leader (known log ends stay, with their times) |
| kgc_group_adoptions_total | counter | outcome | first uses of unknown groups: adopted, new (unknown upstream), waiting (live upstream members), unreachable |
| kgc_adoption_waiting_upstream_members | gauge | group | members a group still has at the upstream while kgc's wait (removed once adopted, or once none of kgc's members asked again within its session timeout) |
| kgc_txn_markers_total | counter | marker | COMMIT or ABORT markers of the upstream's transaction coordinator that decided offsets pending here (docs/exactly-once.md) |
| kgc_txn_tails_stopped | gauge | | participant partitions whose tail stopped (data gone by retention): their transactions stay undecided |
| kgc_txn_clients_told_to_look_again_total | counter | | client connections closed after an AddOffsetsToTxn no TxnOffsetCommit followed (librdkafka#5511) |
"""

from __future__ import annotations

import platform
import time
from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Iterable
from functools import cache
from operator import attrgetter
from typing import Any, NamedTuple

from kafka.protocol.api_key import ApiKey
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from coordinator.version import kgc_version
from protocol.api_keys import known_versions
from protocol.errors import ErrorCode
from protocol.offset_fetch_codec import TUPLE_ERROR_CODE as _TUPLE_ERROR_CODE
from protocol.topics_frame import OffsetColumns, PartitionTuples

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SLOW_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
BYTE_BUCKETS = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)

CONNECTIONS = Gauge("kgc_connections", "Open client connections", registry=REGISTRY)
CONNECTIONS_ACCEPTED = Counter("kgc_connections_accepted", "Client connections accepted", registry=REGISTRY)

GROUPS = Gauge("kgc_groups", "Groups per state (sampled)", ["state"], registry=REGISTRY)
GROUP_MEMBERS = Gauge("kgc_group_members", "Members of all groups (sampled)", registry=REGISTRY)
REBALANCES = Counter("kgc_group_rebalances", "Completed join phases (generation bumps, sampled)",
                     registry=REGISTRY)
REBALANCE_SECONDS = Histogram("kgc_group_rebalance_duration_seconds",
                              "PreparingRebalance entered until Stable or Empty (sampled)",
                              buckets=SLOW_BUCKETS, registry=REGISTRY)
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable")
CONSUMER_GROUPS = Gauge("kgc_consumer_groups", "KIP-848 consumer groups per state (sampled)", ["state"],
                        registry=REGISTRY)
CONSUMER_GROUP_MEMBERS = Gauge("kgc_consumer_group_members", "Members of all KIP-848 consumer groups (sampled)",
                               registry=REGISTRY)
CONSUMER_GROUP_RECONCILIATION_SECONDS = Histogram(
    "kgc_consumer_group_reconciliation_duration_seconds",
    "KIP-848: a new group epoch until every member is Stable at it (sampled)", buckets=SLOW_BUCKETS,
    registry=REGISTRY)
CONSUMER_GROUP_ASSIGNOR_SECONDS = Histogram(
    "kgc_consumer_group_assignor_duration_seconds", "KIP-848: one run of a server-side assignor", ["assignor"],
    buckets=LATENCY_BUCKETS, registry=REGISTRY)
PARTITIONS_OWNED = Gauge("kgc_partitions_owned", "Partitions this instance owns (store replicated)", registry=REGISTRY)
OWNERSHIP_CHANGES = Counter("kgc_ownership_changes", "Ownership generations applied here (store replicated)",
                            registry=REGISTRY)
PARTITIONS_MOVED = Counter("kgc_ownership_partitions_moved", "Partitions gained or lost here (store replicated)",
                           registry=REGISTRY)
OWNERSHIP_CHANGE_SECONDS = Histogram("kgc_ownership_change_duration_seconds",
                                     "From a rebalance of the ownership group to its partitions loaded here",
                                     registry=REGISTRY)
CONSUMER_GROUP_EPOCHS = Counter("kgc_consumer_group_epoch_bumps",
                                "New group epochs of KIP-848 consumer groups (sampled)", registry=REGISTRY)

PARTITIONS = Gauge("kgc_partitions", "__consumer_offsets partitions per runtime state", ["state"],
                   registry=REGISTRY)
PARTITION_LOAD_SECONDS = Histogram("kgc_partition_load_duration_seconds", "Replay of a partition from the log",
                                   buckets=SLOW_BUCKETS, registry=REGISTRY)
PARTITION_LOADED_RECORDS = Counter("kgc_partition_loaded_records", "Records read by partition loads",
                                   registry=REGISTRY)
PARTITION_FAILURES = Counter("kgc_partition_failures", "Partitions failed after a write error",
                             registry=REGISTRY)

OPERATION_FAILURES = Counter("kgc_operation_failures", "Operations that failed alone, their group reset",
                             registry=REGISTRY)

CLEANER_PASSES = Counter("kgc_log_cleaner_passes", "Passes of the online cleaner", registry=REGISTRY)
CLEANER_PASS_SECONDS = Histogram("kgc_log_cleaner_pass_duration_seconds", "One cleaner pass",
                                 buckets=SLOW_BUCKETS, registry=REGISTRY)
CLEANER_BYTES_REMOVED = Counter("kgc_log_cleaner_bytes_removed", "Segment bytes compacted away",
                                registry=REGISTRY)

UPSTREAM_BYTES = Counter("kgc_upstream_bytes", "Bytes exchanged with upstream brokers", ["direction"],
                         registry=REGISTRY)
UPSTREAM_REQUEST_SECONDS = Histogram("kgc_upstream_request_duration_seconds",
                                     "Forwarded request to upstream response", ["api"],
                                     buckets=LATENCY_BUCKETS, registry=REGISTRY)
UPSTREAM_STREAMED = Counter("kgc_upstream_streamed_responses",
                            "Upstream responses passed on to their client as they arrived, not once whole",
                            registry=REGISTRY)
UPSTREAM_REACHABLE = Gauge("kgc_upstream_reachable", "1 when the upstream cluster answers", registry=REGISTRY)
UPSTREAM_BROKERS = Gauge("kgc_upstream_brokers", "Upstream brokers known", registry=REGISTRY)
BUILD_INFO = Gauge("kgc_build_info", "Always 1; the labels say which kgc runs", ["version", "python"],
                   registry=REGISTRY)
BUILD_INFO.labels(kgc_version(), platform.python_version()).set(1)

AUTHENTICATIONS = Counter("kgc_authentications", "SASL exchanges by mechanism and outcome",
                          ["mechanism", "outcome"], registry=REGISTRY)
SESSIONS_EXPIRED = Counter("kgc_sasl_sessions_expired", "Connections closed at the end of their SASL session",
                           registry=REGISTRY)
AUTHORIZATION_DENIALS = Counter("kgc_authorization_denials", "Requests or parts refused by the authorizer",
                                ["api"], registry=REGISTRY)
OFFSETS_DELETED_WITH_TOPICS = Counter("kgc_offsets_deleted_with_topics",
                                      "Offsets deleted because the upstream deleted their topic", registry=REGISTRY)
ADOPTIONS = Counter("kgc_group_adoptions", "First uses of unknown groups, by outcome", ["outcome"],
                    registry=REGISTRY)
ADOPTION_WAITING = Gauge("kgc_adoption_waiting_upstream_members",
                         "Members a group still has at the upstream while kgc's members wait", ["group"],
                         registry=REGISTRY)

# Exactly-once (coordinator/txn)
TXN_MARKERS = Counter("kgc_txn_markers", "Transaction markers that decided offsets pending here, by marker",
                      ["marker"], registry=REGISTRY)
TXN_TAILS_STOPPED = Gauge("kgc_txn_tails_stopped",
                          "Participant partitions whose tail stopped: their transactions stay undecided",
                          registry=REGISTRY)
TXN_CLIENTS_TOLD_TO_LOOK_AGAIN = Counter(
    "kgc_txn_clients_told_to_look_again",
    "Connections closed after an AddOffsetsToTxn no TxnOffsetCommit followed (librdkafka#5511)", registry=REGISTRY)

UPSTREAM_SENT = UPSTREAM_BYTES.labels("sent")
UPSTREAM_RECEIVED = UPSTREAM_BYTES.labels("received")

def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return "unknown"


# ---- requests ---------------------------------------------------------------------------


class RequestMetrics:
    """The counts of one (api, version): requests, latency buckets, response error codes."""

    __slots__ = ("api", "version", "count", "buckets", "seconds", "errors")

    def __init__(self, api: str, version: str):
        self.api = api
        self.version = version
        self.count = 0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)     # the last one is +Inf
        self.seconds = 0.0
        self.errors: Tally[int] = Tally()

    def received(self) -> float:
        self.count += 1
        return time.perf_counter()

    def answered(self, started: float) -> None:
        elapsed = time.perf_counter() - started
        self.buckets[bisect_left(LATENCY_BUCKETS, elapsed)] += 1
        self.seconds += elapsed


# Keyed only by (api key, version) pairs the protocol defines: a bounded set.
_requests: dict[tuple[int, int], RequestMetrics] = {}
# Everything else, by API name ("unknown" for an unknown key): bounded too.
_unknown_versions: dict[str, RequestMetrics] = {}
_offsets_committed = [0]


def request(api_key: int, version: int) -> RequestMetrics:
    metrics = _requests.get((api_key, version))
    if metrics is None:
        metrics = _new_request_metrics(api_key, version)
    return metrics


def _new_request_metrics(api_key: int, version: int) -> RequestMetrics:
    name = api_name(api_key)
    known = known_versions(api_key) if name != "unknown" else None
    if known is None or not known[0] <= version <= known[1]:
        # Outside the closed set: counted under the one "unknown" label of its API, and
        # never a new entry per pair, so a client sending garbage grows nothing.
        metrics = _unknown_versions.get(name)
        if metrics is None:
            metrics = _unknown_versions[name] = RequestMetrics(name, "unknown")
        return metrics
    return _requests.setdefault((api_key, version), RequestMetrics(name, str(version)))


class _RequestCollector:
    """Publishes the `RequestMetrics` tallies as the families they stand for."""

    def collect(self) -> Iterable[Any]:
        requests = CounterMetricFamily("kgc_requests", "Kafka requests received, local and forwarded",
                                       labels=["api", "version"])
        latency = HistogramMetricFamily("kgc_request_duration_seconds", "Request arrival to response ready",
                                        labels=["api", "version"])
        errors = CounterMetricFamily("kgc_response_errors", "Error codes in responses of the APIs kgc serves "
                                     "(NONE included)", labels=["api", "error"])
        by_error: Tally[tuple[str, str]] = Tally()
        # Several versions (and unknown api keys) share a label set: sum them.
        counts: Tally[tuple[str, str]] = Tally()
        histograms: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
        for m in [*_requests.values(), *_unknown_versions.values()]:
            labels = (m.api, m.version)
            counts[labels] += m.count
            buckets, total = histograms.setdefault(labels, ([0] * len(m.buckets), [0.0]))
            for i, n in enumerate(m.buckets):
                buckets[i] += n
            total[0] += m.seconds
            for code, n in m.errors.items():
                by_error[m.api, _error_name(code)] += n
        for labels, n in counts.items():
            requests.add_metric(list(labels), n)
        for labels, (buckets, total) in histograms.items():
            latency.add_metric(list(labels), _cumulative(LATENCY_BUCKETS, buckets), total[0])
        for labels, n in by_error.items():
            errors.add_metric(list(labels), n)
        yield requests
        yield latency
        yield errors
        yield CounterMetricFamily("kgc_offsets_committed", "Partition offsets committed and acknowledged",
                                  value=_offsets_committed[0])


REGISTRY.register(_RequestCollector())


def _cumulative(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, int]]:
    """Per-bucket counts (the last one +Inf) as the cumulative `le` buckets Prometheus reads."""
    cumulative, running = [], 0
    for bound, n in zip((*map(floatToGoString, bounds), "+Inf"), counts, strict=True):
        running += n
        cumulative.append((bound, running))
    return cumulative


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


@cache
def _error_paths(response_class: Any, version: int) -> tuple[tuple[str, ...], ...]:
    """Where `error_code` fields sit in this response at this version, from its schema."""
    paths: list[tuple[str, ...]] = []

    def walk(fields: dict[str, Any], prefix: tuple[str, ...]) -> None:
        for name, field in fields.items():
            if not field.for_version_q(version):
                continue
            if name == "error_code":
                paths.append((*prefix, name))
            elif field.is_struct() or field.is_struct_array():
                walk(field.fields, (*prefix, name))

    walk(response_class._struct.fields, ())
    return tuple(paths)


def _collect_codes(node: Any, path: tuple[str, ...], tally: Tally[int]) -> None:
    value = getattr(node, path[0])
    if len(path) == 1:
        tally[value] += 1
    elif isinstance(value, list):
        for item in value:
            _collect_codes(item, path[1:], tally)
    elif value is not None:
        _collect_codes(value, path[1:], tally)


def response(metrics: RequestMetrics, api_key: int, version: int, answer: Any) -> None:
    """Counts the error codes of a local API's response (and acknowledged commits)."""
    _offsets_committed[0] += _count_codes(metrics.errors, api_key, version, answer)


def response_codes(api_key: int, version: int, answer: Any) -> tuple[Tally[int], int]:
    """`response`'s counting into a tally of its own, for a codec thread to do off the loop
    for a large answer (walking all its codes on the loop would be a loop step of its own);
    `count_response_codes` adds the result on the loop."""
    tally: Tally[int] = Tally()
    return tally, _count_codes(tally, api_key, version, answer)


def count_response_codes(metrics: RequestMetrics, codes: tuple[Tally[int], int]) -> None:
    tally, committed = codes
    metrics.errors.update(tally)
    _offsets_committed[0] += committed


def _count_codes(tally: Tally[int], api_key: int, version: int, answer: Any) -> int:
    """Adds the answer's error codes to `tally`; the offsets it acknowledges."""
    if api_key == _OFFSET_COMMIT:
        return _offset_commit_codes(answer, tally)
    if api_key == _OFFSET_FETCH:
        _offset_fetch_codes(answer, version, tally)
        return 0
    paths = _error_paths(answer.__class__, version)
    if paths == _TOP_LEVEL_ONLY:
        tally[answer.error_code] += 1
        return 0
    for path in paths:
        _collect_codes(answer, path, tally)
    return 0


def _offset_commit_codes(answer: Any, tally: Tally[int]) -> int:
    return _partition_codes(answer.topics, tally)


def _offset_fetch_codes(answer: Any, version: int, tally: Tally[int]) -> None:
    # v0-7 answer one group: [v2+] its code, then one per partition (`_error_paths`);
    # v8+ a code per group, then one per partition of its topics.
    if version >= 8:
        for group in answer.groups:
            tally[group.error_code] += 1
            _partition_codes(group.topics, tally)
        return
    if version >= 2:
        tally[answer.error_code] += 1
    _partition_codes(answer.topics, tally)


def _partition_codes(topics: Any, tally: Tally[int]) -> int:
    """Adds the codes of `topics`' partitions; how many are NONE. One code per partition
    committed or fetched, nearly all NONE: counted per topic, not walked one call per
    partition as `_collect_codes` would."""
    ok_total = 0
    for topic in topics:
        partitions = topic.partitions
        if isinstance(partitions, OffsetColumns):     # all NONE
            ok_total += len(partitions)
            continue
        codes = list(map(_TUPLE_ERROR_CODE if type(partitions) is PartitionTuples else _ERROR_CODE, partitions))
        ok = codes.count(_NONE)
        ok_total += ok
        if ok != len(codes):
            tally.update(code for code in codes if code != _NONE)
    if ok_total:
        tally[_NONE] += ok_total
    return ok_total


_TOP_LEVEL_ONLY = (("error_code",),)
_OFFSET_COMMIT = int(ApiKey.OffsetCommit)
_OFFSET_FETCH = int(ApiKey.OffsetFetch)
_NONE = int(ErrorCode.NONE)
_ERROR_CODE = attrgetter("error_code")


# ---- connections, partitions, cleaner, upstream ----------------------------------------


def connection_opened() -> None:
    CONNECTIONS_ACCEPTED.inc()
    CONNECTIONS.inc()


def connection_closed() -> None:
    CONNECTIONS.dec()


def partition_loaded(seconds: float, records: int) -> None:
    PARTITION_LOAD_SECONDS.observe(seconds)
    PARTITION_LOADED_RECORDS.inc(records)


def partition_failed() -> None:
    PARTITION_FAILURES.inc()


def operation_failed() -> None:
    OPERATION_FAILURES.inc()


def partition_states(states: Iterable[str], counts: Tally[str]) -> None:
    for state in states:
        PARTITIONS.labels(state).set(counts[state])


def cleaner_pass(seconds: float, bytes_removed: int) -> None:
    CLEANER_PASSES.inc()
    CLEANER_PASS_SECONDS.observe(seconds)
    CLEANER_BYTES_REMOVED.inc(bytes_removed)


_upstream_children: dict[int, Any] = {}


def upstream_answered(api_key: int, started: float) -> None:
    child = _upstream_children.get(api_key)
    if child is None:
        child = _upstream_children.setdefault(api_key, UPSTREAM_REQUEST_SECONDS.labels(api_name(api_key)))
    child.observe(time.perf_counter() - started)


def upstream_state(reachable: bool, brokers: int) -> None:
    UPSTREAM_REACHABLE.set(int(reachable))
    UPSTREAM_BROKERS.set(brokers)


# A client names the mechanism it wants: any other name is counted as "other".
_SASL_MECHANISM_LABELS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"})
_SASL_OUTCOMES = frozenset({"success", "reauthenticated", "failure", "unsupported_mechanism"})


def sasl_attempt(mechanism: str | None, outcome: str) -> None:
    if outcome not in _SASL_OUTCOMES:
        raise ValueError(f"unknown SASL outcome {outcome!r}")
    AUTHENTICATIONS.labels(mechanism if mechanism in _SASL_MECHANISM_LABELS else "other", outcome).inc()


def sasl_session_expired() -> None:
    SESSIONS_EXPIRED.inc()


def authorization_denied(api_key: int) -> None:
    AUTHORIZATION_DENIALS.labels(api_name(api_key)).inc()


def ownership_changed(owned: int, moved: int, seconds: float) -> None:
    PARTITIONS_OWNED.set(owned)
    OWNERSHIP_CHANGES.inc()
    PARTITIONS_MOVED.inc(moved)
    OWNERSHIP_CHANGE_SECONDS.observe(seconds)


def offsets_deleted_with_topics(count: int) -> None:
    OFFSETS_DELETED_WITH_TOPICS.inc(count)


def adoption(outcome: str) -> None:
    ADOPTIONS.labels(outcome).inc()


def adoption_waiting(group_id: str, upstream_members: int) -> None:
    ADOPTION_WAITING.labels(group_id).set(upstream_members)


def adoption_waiting_done(group_id: str) -> None:
    ADOPTION_WAITING.remove(group_id)


# ---- the log (storage calls this through its observer seam) -----------------------------


class _Histogram:
    """A histogram without labels, counted on the event-loop thread and published at scrape
    time (`_HistogramCollector`): the log's, observed on every append, where
    prometheus-client's `observe` takes a lock per call."""

    __slots__ = ("name", "documentation", "bounds", "counts", "total")

    def __init__(self, name: str, documentation: str, bounds: tuple[float, ...]):
        self.name = name
        self.documentation = documentation
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)     # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: the first bound >= value, as Prometheus's `le` buckets count.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value


class _HistogramCollector:
    def __init__(self, *histograms: _Histogram):
        self._histograms = histograms

    def collect(self) -> Iterable[Any]:
        for h in self._histograms:
            family = HistogramMetricFamily(h.name, h.documentation)
            family.add_metric([], _cumulative(h.bounds, h.counts), h.total)
            yield family


LOG_APPEND_SECONDS = _Histogram("kgc_log_append_duration_seconds", "Per batch, append to durable", LATENCY_BUCKETS)
LOG_WRITE_SECONDS = _Histogram("kgc_log_write_duration_seconds", "Write call(s) of one group commit",
                               LATENCY_BUCKETS)
LOG_FSYNC_SECONDS = _Histogram("kgc_log_fsync_duration_seconds", "One fsync of a partition's active segment",
                               LATENCY_BUCKETS)
LOG_GROUP_COMMIT_BATCHES = _Histogram("kgc_log_group_commit_batches", "Batches made durable by one group commit",
                                      COUNT_BUCKETS)
LOG_GROUP_COMMIT_BYTES = _Histogram("kgc_log_group_commit_bytes", "Bytes written by one group commit",
                                    BYTE_BUCKETS)
REGISTRY.register(_HistogramCollector(LOG_APPEND_SECONDS, LOG_WRITE_SECONDS, LOG_FSYNC_SECONDS,
                                      LOG_GROUP_COMMIT_BATCHES, LOG_GROUP_COMMIT_BYTES))


class LogObserver:
    """What `storage.group_commit` reports; storage sees only this object's methods."""

    __slots__ = ()

    def group_committed(self, batches: int, size_bytes: int, write_s: float, fsync_s: float | None) -> None:
        LOG_GROUP_COMMIT_BATCHES.observe(batches)
        LOG_GROUP_COMMIT_BYTES.observe(size_bytes)
        LOG_WRITE_SECONDS.observe(write_s)
        if fsync_s is not None:
            LOG_FSYNC_SECONDS.observe(fsync_s)

    def fsynced(self, fsync_s: float) -> None:
        LOG_FSYNC_SECONDS.observe(fsync_s)

    def durable(self, append_s: float) -> None:
        LOG_APPEND_SECONDS.observe(append_s)


LOG_OBSERVER = LogObserver()


# ---- consumer lag (set after each log-end refresh, read at scrape time) -----------------

# Lag series are bounded: past this many label sets per family, the rest are dropped and
# counted in kgc_consumer_lag_series_dropped (a scrape must stay small whatever the groups).
MAX_LAG_SERIES = 10_000


class LagRow(NamedTuple):
    group: str
    topic: str
    partition: int
    lag: int | None          # None: unknown (the HTTP API says why)


class _LagCollector:
    def __init__(self) -> None:
        self.rows: list[LagRow] = []
        self.per_partition = False
        self.refreshed_s: float | None = None

    def collect(self) -> Iterable[Any]:
        by_topic: dict[tuple[str, str], list[int]] = {}
        for row in self.rows:
            known_unknown = by_topic.setdefault((row.group, row.topic), [0, 0])
            if row.lag is None:
                known_unknown[1] += 1
            else:
                known_unknown[0] += row.lag
        lag = GaugeMetricFamily("kgc_consumer_lag", "Consumer lag per group and topic: log end minus committed "
                                "offset, summed over the partitions (absent while any one's lag is unknown)",
                                labels=["group", "topic"])
        unknown = GaugeMetricFamily("kgc_consumer_lag_unknown_partitions", "Partitions per group and topic whose "
                                    "lag is unknown (no log end, or the upstream's end is below the commit)",
                                    labels=["group", "topic"])
        dropped = 0
        for i, ((group, topic), (known, n_unknown)) in enumerate(sorted(by_topic.items())):
            if i >= MAX_LAG_SERIES:
                dropped += 1
                continue
            if not n_unknown:   # a sum without them would read as the lag: absent, not too small
                lag.add_metric([group, topic], known)
            unknown.add_metric([group, topic], n_unknown)
        yield lag
        yield unknown
        if self.per_partition:
            per_partition = GaugeMetricFamily("kgc_consumer_lag_partition", "Consumer lag per group, topic and "
                                              "partition (only where it is known)",
                                              labels=["group", "topic", "partition"])
            known_rows = [(r, r.lag) for r in self.rows if r.lag is not None]
            for row, row_lag in known_rows[:MAX_LAG_SERIES]:
                per_partition.add_metric([row.group, row.topic, str(row.partition)], row_lag)
            dropped += max(0, len(known_rows) - MAX_LAG_SERIES)
            yield per_partition
        yield GaugeMetricFamily("kgc_consumer_lag_series_dropped", f"Lag series left out past {MAX_LAG_SERIES} "
                                "per family", value=dropped)
        # No sample until a refresh reached the upstream: a 0 would chart as decades of
        # staleness on an instance that has no upstream to refresh from.
        refreshed = GaugeMetricFamily("kgc_log_ends_refreshed_timestamp_seconds", "When the upstream last "
                                      "answered the periodic lag refresh for every partition")
        if self.refreshed_s is not None:
            refreshed.add_metric([], self.refreshed_s)
        yield refreshed


_LAG = _LagCollector()
REGISTRY.register(_LAG)


def consumer_lag(rows: list[LagRow], *, per_partition: bool) -> None:
    _LAG.rows = rows
    _LAG.per_partition = per_partition

LOG_END_REFRESH_FAILURES = Counter("kgc_log_end_refresh_failures", "Periodic lag refreshes that could not reach "
                                   "the upstream or a partition's leader, or found one moving (known log ends stay, "
                                   "with their times)",
                                   registry=REGISTRY)


def log_ends_refreshed(reached: bool) -> None:
    if reached:
        _LAG.refreshed_s = time.time()
    else:
        LOG_END_REFRESH_FAILURES.inc()
