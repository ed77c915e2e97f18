"""The HTTP server on its own port: metrics, health, readiness and a read-only groups API.

| path | answers |
|---|---|
| GET /metrics | Prometheus text format (`coordinator.metrics`), group gauges sampled first |
| GET /healthz | 200 while the process serves HTTP at all (liveness) |
| GET /readyz | 200 when every partition is loaded (ACTIVE) and the upstream, if any, answers; else 503 with the reasons; `warnings` either way (an embedded upstream that keeps topics in memory) |
| GET /v1/groups | every group of the loaded partitions: state, protocol, generation, member count, lag |
| GET /v1/groups/{group} | one group: members with their assignments, committed offsets with log end, lag and origin (committed, or adopted from where and when) (404 if unknown) |

Lag comes from the log ends the app keeps fresh (`kgc.log_ends`, None without an
upstream); /v1/groups/{group} fetches its own partitions' ends first, within a bound.

With `http_auth_token_file`, every path but /healthz and /readyz (what orchestrators probe)
needs `Authorization: Bearer <token>`, else 401; with `http_tls_cert_file` it is served
over TLS. /v1/groups discloses member and client ids and hosts: protect it when kgc's
HTTP port is reachable by others.

The server starts before the log is opened, so liveness holds through a long load while
readiness says why it is not ready yet; it stops last on shutdown.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from coordinator import metrics
from coordinator.consumer_lag import LogEnd
from coordinator.http import groups
from coordinator.partitioning import partition_for
from coordinator.runtime.api import PartitionLoading, PartitionNotActive, RuntimeClosed
from coordinator.runtime.partition_state import PartitionState, failed_to_load

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    reasons: tuple[str, ...]
    partitions: dict[str, int] = field(default_factory=dict)
    upstream: str | None = None


def readiness(kgc: Any) -> Readiness:
    """`kgc` is the `KgcApp`: its runtime (None until the log is open), cluster, stopping."""
    reasons = []
    if kgc.stopping:
        reasons.append("shutting down")
    partitions: dict[str, int] = {}
    runtime = kgc.runtime
    if runtime is None:
        reasons.append("starting: the log is not open yet")
    else:
        counts = Counter(runtime.partition_state(p).value for p in sorted(runtime.owned))
        partitions = dict(sorted(counts.items()))
        if not runtime.all_loaded:
            waiting = {state: n for state, n in partitions.items()
                       if state not in (PartitionState.ACTIVE.value, PartitionState.FAILED.value)}
            if waiting:
                reasons.append("partitions not active: " + ", ".join(f"{n} {state}" for state, n in waiting.items()))
            if PartitionState.FAILED.value in partitions:
                reasons.append(failed_to_load(partitions[PartitionState.FAILED.value], len(runtime.owned)))
            # A partition the store refuses (damage at open or found while running) is
            # named with the file, byte and offsets its error names.
            errors = getattr(kgc.store, "partition_error", None)
            for p in sorted(runtime.owned):
                error = errors(p) if errors is not None else None
                if error is not None and runtime.partition_state(p) is PartitionState.FAILED:
                    reasons.append(f"partition {p}: {error}")
    if kgc.ownership is not None and not kgc.ownership.history:
        reasons.append(f"ownership: no partitions assigned yet by the group {kgc.ownership.group_id} upstream")
    elif kgc.ownership is not None and kgc.ownership.owned and not kgc.ownership.serving():
        reasons.append(f"ownership: membership of {kgc.ownership.group_id} upstream lapsed (no heartbeat answered "
                       "within the session timeout); not serving until the upstream answers")
    upstream = None
    if kgc.cluster is not None:
        upstream = kgc.cluster.status
        if not kgc.cluster.ready:
            reasons.append(f"upstream: {upstream}")
    return Readiness(not reasons, tuple(reasons), partitions, upstream)


OPEN_PATHS = frozenset({"/healthz", "/readyz"})


class HttpServer:
    def __init__(self, kgc: Any, host: str, port: int, *, tls: ssl.SSLContext | None = None,
                 token: str | None = None):
        self._kgc = kgc
        self._host = host
        self._port = port
        self._tls = tls
        self._expected = None if token is None else f"Bearer {token}".encode()
        self._runner: web.AppRunner | None = None
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/v1/groups", self._groups)
        app.router.add_get("/v1/groups/{group}", self._group)
        app.router.add_get("/v1/ownership", self._ownership)
        self._app = app

    async def start(self) -> None:
        # No access log: a scrape every few seconds would drown what matters.
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._tls)
        await site.start()
        self._port = self._runner.addresses[0][1]
        log.info("HTTP%s (metrics, health, groups) on %s:%d%s", "S" if self._tls else "", self._host, self._port,
                 ", bearer token required" if self._expected else "")

    @property
    def port(self) -> int:
        return self._port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _authenticate(self, request: web.Request, handler) -> web.StreamResponse:
        if self._expected is not None and request.path not in OPEN_PATHS:
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, self._expected):
                return web.json_response({"error": "a bearer token is required"}, status=401,
                                         headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    # ---- handlers ------------------------------------------------------------------------

    async def _metrics(self, request: web.Request) -> web.Response:
        sampler = self._kgc.sampler
        if sampler is not None:
            await sampler.sample()
        return web.Response(body=generate_latest(metrics.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        r = readiness(self._kgc)
        body = {"ready": r.ready, "reasons": list(r.reasons), "partitions": r.partitions, "upstream": r.upstream,
                "warnings": list(getattr(self._kgc, "warnings", ()))}
        return web.json_response(body, status=200 if r.ready else 503)

    async def _groups(self, request: web.Request) -> web.Response:
        runtime = self._kgc.runtime
        if runtime is None:
            return web.json_response({"error": "starting: the log is not open yet"}, status=503)
        partitions = sorted(runtime.owned)     # several instances: each lists its own groups
        outcomes = await asyncio.gather(*(runtime.read(p, _summaries_with_lag(self._end_of)) for p in partitions),
                                        return_exceptions=True)
        listed: list[dict[str, Any]] = []
        unavailable = []
        for partition, outcome in zip(partitions, outcomes, strict=True):
            if isinstance(outcome, PartitionLoading | PartitionNotActive | RuntimeClosed):
                unavailable.append(partition)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                listed.extend(outcome)
        listed.sort(key=lambda g: g["group_id"])
        return web.json_response({"groups": listed, "unavailable_partitions": unavailable})

    async def _ownership(self, request: web.Request) -> web.Response:
        """Which instance or process owns which partition, and (store replicated) the last changes here."""
        ownership = self._kgc.ownership
        runtime = self._kgc.runtime
        split = getattr(self._kgc, "split", None)
        if split is not None:
            me = split.me
            return web.json_response({
                "mode": "processes", "process": split.index, "processes": len(split.members),
                "instance": {"node_id": me.node_id, "host": me.host, "port": me.port}, "owned": sorted(split.owned),
                "owners": {str(p): f"{i.host}:{i.port}" for p, i in sorted(split.owners.items())}})
        if ownership is None:
            owned = sorted(runtime.owned) if runtime is not None else []
            return web.json_response({"mode": "single", "owned": owned})
        me = ownership.me
        return web.json_response({
            "mode": "replicated", "group": ownership.group_id, "generation": ownership.generation,
            "member_id": ownership.member_id, "leader": ownership.leader, "instance": {"node_id": me.node_id, "host": me.host, "port": me.port},
            "owned": sorted(ownership.owned), "serving": ownership.serving(),
            "owners": {str(p): f"{i.host}:{i.port}" for p, i in sorted(ownership.owners.items())},
            # Where clients reach each upstream broker: the same instance by every instance's map.
            "brokers": {str(n): ":".join(map(str, self._kgc.broker_address(n))) for n in sorted(self._kgc.broker_ports)},
            "changes": [{"generation": c.generation, "at": c.at, "gained": sorted(c.gained), "lost": sorted(c.lost),
                         "members": c.members, "took_ms": round(c.took_ms, 1), "cause": c.cause} for c in ownership.history[-20:]]})

    async def _group(self, request: web.Request) -> web.Response:
        runtime = self._kgc.runtime
        if runtime is None:
            return web.json_response({"error": "starting: the log is not open yet"}, status=503)
        group_id = request.match_info["group"]
        partition = partition_for(group_id, runtime.num_partitions)
        try:
            view = await runtime.read(partition, lambda shard: groups.detail(shard, group_id))
        except (PartitionLoading, PartitionNotActive, RuntimeClosed) as exc:
            log.debug("[group=%s] /v1/groups refused: partition %d: %s", group_id, partition, exc)
            return web.json_response({"error": str(exc), "partition": partition}, status=503)
        if view is None:
            return web.json_response({"error": f"group {group_id} not found", "partition": partition}, status=404)
        await groups.add_offset_origins(view, self._kgc.store, partition)
        log_ends = getattr(self._kgc, "log_ends", None)
        if log_ends is not None:   # on demand: this group's partitions, fresh
            await log_ends.refresh((topic, int(p)) for topic, by_p in view["offsets"].items() for p in by_p)
        groups.add_partition_lag(view, self._end_of)
        return web.json_response(view)

    def _end_of(self, tp: tuple[str, int]) -> LogEnd:
        log_ends = getattr(self._kgc, "log_ends", None)
        if log_ends is None:
            return NO_UPSTREAM
        return log_ends.end_of(tp)


NO_UPSTREAM = LogEnd(None, "no upstream: kgc runs standalone, with no log ends to compare with")


def _summaries_with_lag(end_of: groups.EndOf):
    def read(shard: Any) -> list[dict[str, Any]]:
        committed = groups.committed_offsets(shard)
        listed = groups.summaries(shard)
        for summary in listed:
            summary["lag"] = groups.lag_summary(committed.get(summary["group_id"], {}), end_of)
        return listed
    return read
