"""One client connection's way upstream: opaque forwarding on a connection of its own.

A session belongs to one client connection and one listener. A broker listener forwards
to its upstream broker; the bootstrap listener (`listener_node_id=None`) to whichever
broker the cluster last reached. The session opens one upstream connection on its first
forward and keeps it for its life: the client's correlation ids go upstream unchanged,
and upstream's FIFO order is the client's (Kroxylicious, grepplabs/kafka-proxy).

`forward(header, payload)` never awaits. It returns None for a Produce with acks=0 (no
response will come: take no response slot), else a future of the whole response frame
(size prefix, header, body), address-rewritten where the API carries addresses.

How the network layer must treat the future's failures:
- `UpstreamUnavailable`: the upstream connection is gone (refused, timed out, dropped,
  out of step) or there is no broker to forward to. Close the client connection once the
  responses before this one are written: the client reconnects, refreshes metadata and
  retries. Every later forward of the session fails the same way, unless nothing reached
  the upstream yet (the connect failed, or there was no broker): then the next forward
  looks for a broker again.
- `MalformedResponse` (upstream sent what we cannot rewrite) and `UnforwardableRequest`
  (a request we cannot forward safely): close the client connection too.
A Metadata request that finds no upstream at all is not failed but answered locally
(`unavailable.metadata_without_upstream`), so clients keep their coordinator.

A Fetch response that needs no rewrite (below v16: kgc advertises no newer Fetch, see
versions.py) may instead be passed on to the client as it arrives (upstream.py,
"Cut-through"): its bytes are then written by the client connection's `stream` as they
come, and its future settles with None (nothing left to write) once they all went out.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.gateway import rewrite
from coordinator.gateway.cluster import UpstreamCluster
from coordinator.gateway.offsets_metadata import add_offsets_topic, wants_offsets_topic
from coordinator.gateway.offsets_topic import FORWARD, OffsetsTopic
from coordinator.gateway.plan import ListenerPlan
from coordinator.gateway.rewrite import Broker
from coordinator.gateway.unavailable import metadata_without_upstream
from coordinator.gateway.upstream import UpstreamConnection, UpstreamUnavailable, failed_future
from protocol.headers import HeaderError, RequestHeader
from protocol.peek import produce_expects_response

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")


class StreamingClient(Protocol):
    """The client connection a response can stream to (net/connection.py)."""

    def begin_stream(self, slot: asyncio.Future, source: UpstreamConnection) -> bool: ...

    def stream(self, data: bytes | memoryview) -> None: ...

    def end_stream(self) -> None: ...


class ClientStream:
    """One Fetch response's way to its client when it is passed on as it arrives."""

    __slots__ = ("_client", "_response", "_api_key", "_started")

    def __init__(self, client: StreamingClient, response: asyncio.Future, api_key: int, started: float):
        self._client = client
        self._response = response
        self._api_key = api_key
        self._started = started

    def begin(self, source: UpstreamConnection) -> bool:
        return not self._response.done() and self._client.begin_stream(self._response, source)

    def write(self, data: bytes | memoryview) -> None:
        self._client.stream(data)

    def end(self) -> None:
        metrics.upstream_answered(self._api_key, self._started)
        if not self._response.done():
            self._response.set_result(None)     # every byte went out: nothing left to write
        self._client.end_stream()


class UnforwardableRequest(ValueError):
    """A request the gateway must not pass on as it is."""


class GatewaySession:
    def __init__(self, cluster: UpstreamCluster, plan: ListenerPlan, listener_node_id: int | None,
                 offsets_topic: OffsetsTopic | None = None, *, as_kgc: bool = True,
                 client: StreamingClient | None = None,
                 address_for: Callable[[int], tuple[str, int]] | None = None,
                 coordinators: Callable[[], Sequence[Broker]] | None = None):
        self._cluster = cluster
        self._address_for = address_for or plan.listener_address
        self._coordinators = coordinators or (lambda: (plan.coordinator,))
        self._as_kgc = as_kgc          # log in upstream as kgc (not under SASL passthrough)
        self._plan = plan
        self._offsets_topic = offsets_topic
        self.listener_node_id = listener_node_id
        self._client = client          # None: every response is forwarded whole
        self._upstream: UpstreamConnection | None = None
        self._closed = False
        self._loop = asyncio.get_running_loop()

    def forward(self, header: RequestHeader, payload: bytes) -> asyncio.Future | None:
        api_key, version = header.api_key, header.api_version
        if version > rewrite.REWRITE_MAX_VERSIONS.get(api_key, version):
            # Never advertised (versions.py): its layout may carry addresses we cannot see.
            return failed_future(self._loop, UnforwardableRequest(
                f"{ApiKey(api_key).name} v{version} is newer than kgc can rewrite"))
        expect_response = True
        if api_key == ApiKey.Produce:
            try:
                expect_response = produce_expects_response(version, payload)
            except HeaderError as exc:
                return failed_future(self._loop, UnforwardableRequest(f"unreadable Produce v{version}: {exc}"))
        if self._offsets_topic is not None:
            routed = self._offsets_topic.route(header, payload, self.listener_node_id, expect_response)
            if routed is not FORWARD:
                return routed
        upstream = self._connection()
        response = self._loop.create_future()
        started = time.perf_counter()
        if isinstance(upstream, UpstreamUnavailable):
            sent = failed_future(self._loop, upstream)
        else:
            sink = None
            if self._client is not None and api_key == ApiKey.Fetch and not rewrite.rewrites_fetch(version):
                sink = ClientStream(self._client, response, api_key, started)
            forwarded = upstream.send(header.correlation_id, payload, expect_response, sink)
            if forwarded is None:
                return None
            sent = forwarded
        sent.add_done_callback(partial(self._complete, response, header, payload, started))
        return response

    def _connection(self) -> UpstreamConnection | UpstreamUnavailable:
        if self._closed:
            return UpstreamUnavailable("session closed")
        if self._upstream is None or self._upstream.failure is not None and self._upstream.failure.before_connect:
            # Nothing reached the upstream on this session yet: a Metadata answered locally
            # leaves the client connected, and its next request looks for a broker again.
            address = self._target()
            if address is None:
                return UpstreamUnavailable(self._no_target_reason(), before_connect=True)
            self._upstream = self._cluster.forwarding_connection(*address, as_kgc=self._as_kgc)
        return self._upstream

    def _target(self) -> tuple[str, int] | None:
        if self.listener_node_id is None:
            return self._cluster.live_broker()
        broker = self._cluster.brokers.get(self.listener_node_id)
        return None if broker is None else (broker.host, broker.port)

    def _no_target_reason(self) -> str:
        if self.listener_node_id is None:
            return self._cluster.status
        return f"upstream node {self.listener_node_id} is not in the cluster's metadata"

    def _complete(self, response: asyncio.Future, header: RequestHeader, payload: bytes, started: float,
                  sent: asyncio.Future) -> None:
        if sent.cancelled():
            response.cancel()
            return
        error = sent.exception()
        if response.done():  # cancelled: the client connection is gone
            return
        if error is None:
            metrics.upstream_answered(header.api_key, started)
            try:
                response.set_result(_framed(self._rewrite(header, payload, sent.result())))
            except ValueError as exc:  # MalformedResponse, or a node the plan has no port for
                log.warning("cannot rewrite %s v%d response from upstream: %s",
                            _name(header.api_key), header.api_version, exc)
                response.set_exception(exc)
            return
        self._cluster.refresh_soon()
        if (header.api_key == ApiKey.Metadata and isinstance(error, UpstreamUnavailable)
                and error.before_connect):
            log.info("answering Metadata v%d locally, upstream unavailable: %s", header.api_version, error)
            try:
                response.set_result(_framed(metadata_without_upstream(
                    header.api_version, header.correlation_id, payload[header.header_len:],
                    self._coordinators(), self._cluster.cluster_id)))
            except Exception as exc:  # kafka-python raises assorted errors on a malformed body
                response.set_exception(UnforwardableRequest(f"unreadable Metadata v{header.api_version}: {exc}"))
            return
        log.debug("cannot forward %s v%d: %s", _name(header.api_key), header.api_version, error)
        response.set_exception(error)

    def _rewrite(self, header: RequestHeader, request: bytes, payload: bytes) -> bytes:
        api_key, version = header.api_key, header.api_version
        address_for = self._address_for
        if api_key == ApiKey.Metadata:
            payload, brokers = rewrite.rewrite_metadata(payload, version, address_for, self._coordinators())
            self._cluster.observe_brokers(brokers)
            if self._offsets_topic is not None and wants_offsets_topic(request[header.header_len:], version):
                payload = add_offsets_topic(payload, version,
                                            self._offsets_topic.leaders(self._plan.coordinator_node_id))
            return payload
        if api_key == ApiKey.Fetch:
            return rewrite.rewrite_fetch(payload, version, address_for)
        if api_key == ApiKey.Produce:
            return rewrite.rewrite_produce(payload, version, address_for)
        if api_key == ApiKey.FindCoordinator:
            return rewrite.rewrite_find_coordinator(payload, version, address_for)
        if api_key == ApiKey.DescribeCluster:
            return rewrite.rewrite_describe_cluster(payload, version, address_for)
        return payload

    async def close(self) -> None:
        upstream, self._upstream = self._upstream, None
        self._closed = True
        if upstream is not None:
            await upstream.close()


def _framed(payload: bytes) -> bytes:
    """The network layer writes whole frames: size prefix, then header and body."""
    return _SIZE.pack(len(payload)) + payload


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
