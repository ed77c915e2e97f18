"""Listeners: the bootstrap/coordinator listener and, with an upstream, one per broker.

Each closes the connections that Kafka's connection bounds refuse (`connection_limits`):
past their address's limit when accepted, idle past `connections.max.idle.ms` on its
sweep. The per-address count is shared by every listener.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from functools import partial

from coordinator import metrics
from coordinator.net.connection import ConnectionState, FrameHandler, KafkaConnection
from coordinator.net.connection_limits import ConnectionsPerIp, IdleLimit
from coordinator.security.tls import HANDSHAKE_TIMEOUT_S, ServerTls

log = logging.getLogger(__name__)

DEFAULT_IDLE_LIMIT = IdleLimit()     # Kafka's connections.max.idle.ms default
# Kafka's socket.listen.backlog.size is 50, beside a thread that only accepts. kgc accepts on
# its event loop, so a burst of connects (a restart's reconnections, a large group finding its
# coordinator) waits in the kernel's queue while the loop serves others; a full queue drops
# SYNs, and their clients retry a second or more later. The kernel caps it at somaxconn.
DEFAULT_BACKLOG = 4096


class Listener:
    """A TCP listener whose connections speak for one node (None: the bootstrap listener)."""

    def __init__(self, host: str, port: int, *, listener_node_id: int | None,
                 max_frame_bytes: int, max_in_flight: int, tls: ServerTls | None = None,
                 login_frame_bytes: int | None = None, per_ip: ConnectionsPerIp | None = None,
                 idle: IdleLimit = DEFAULT_IDLE_LIMIT, clock: Callable[[], float] = time.monotonic,
                 shared: bool = False, backlog: int = DEFAULT_BACKLOG):
        self._tls = tls
        self._backlog = backlog
        self._shared = shared   # other processes bind the same port (SO_REUSEPORT): the kernel spreads connections
        self._sock: socket.socket | None = None
        self._host = host
        self._port = port
        self._node_id = listener_node_id
        self._max_frame_bytes = max_frame_bytes
        self._max_in_flight = max_in_flight
        self._login_frame_bytes = login_frame_bytes     # None: no login on this listener
        self._per_ip = per_ip or ConnectionsPerIp()
        self._idle = idle
        self._clock = clock
        self._sweep: asyncio.TimerHandle | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[_TrackedConnection] = set()

    def _make_connection(self, dispatcher: FrameHandler) -> _TrackedConnection:
        return _TrackedConnection(dispatcher, self._connections, self._per_ip, max_frame_bytes=self._max_frame_bytes,
                                  max_in_flight=self._max_in_flight, listener_node_id=self._node_id,
                                  tls=self._tls is not None, login_frame_bytes=self._login_frame_bytes,
                                  clock=self._clock)

    def _sweep_idle(self) -> None:
        for conn in self._idle.idle(self._connections, self._clock()):
            log.info("closing connection from %s: idle for more than %d ms (connections_max_idle_ms)",
                     conn.peer_host, self._idle.max_idle_ms)
            conn.close()
        self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        if self._idle.enabled:
            self._sweep = asyncio.get_running_loop().call_later(self._idle.sweep_interval_ms / 1000,
                                                                self._sweep_idle)

    def bind(self) -> int:
        """Bind before serving, so the port (maybe ephemeral) is known to what answers for it."""
        self._sock = socket.create_server((self._host, self._port), reuse_port=self._shared, backlog=self._backlog)
        self._port = self._sock.getsockname()[1]
        return self._port

    async def serve(self, dispatcher: FrameHandler) -> None:
        if self._sock is None:
            raise RuntimeError("a listener serves once it is bound")
        loop = asyncio.get_running_loop()
        make = partial(self._make_connection, dispatcher)
        if self._tls is None:
            self._server = await loop.create_server(make, sock=self._sock, backlog=self._backlog)
        else:
            self._server = await loop.create_server(make, sock=self._sock, backlog=self._backlog, ssl=self._tls.context,
                                                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        self._schedule_sweep()
        log.info("listening on %s:%d (%s%s)", self._host, self._port,
                 "bootstrap/coordinator" if self._node_id is None else f"broker {self._node_id}",
                 ", TLS" if self._tls is not None else "")

    @property
    def port(self) -> int:
        return self._port

    async def stop_accepting(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def drain_connections(self) -> None:
        for conn in self._connections:
            conn.drain()

    @property
    def in_flight(self) -> int:
        """Responses still owed on this listener's connections."""
        return sum(conn.in_flight for conn in self._connections)

    def close_connections(self) -> None:
        for conn in list(self._connections):
            conn.close()


class _TrackedConnection(KafkaConnection):
    """A connection that counts itself in its address's limit and its listener's registry."""

    __slots__ = ("registry", "per_ip", "_counted")

    def __init__(self, dispatcher: FrameHandler, registry: set[_TrackedConnection], per_ip: ConnectionsPerIp, *,
                 max_frame_bytes: int, max_in_flight: int, listener_node_id: int | None, tls: bool,
                 login_frame_bytes: int | None, clock: Callable[[], float]):
        super().__init__(dispatcher, max_frame_bytes=max_frame_bytes, max_in_flight=max_in_flight,
                         listener_node_id=listener_node_id, tls=tls, login_frame_bytes=login_frame_bytes, clock=clock)
        self.registry = registry
        self.per_ip = per_ip
        self._counted = False

    def connection_made(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        host = peer[0] if peer else "unknown"
        self._counted = self.per_ip.admit(host)
        if not self._counted:
            # Kafka's ConnectionQuotas: refused as accepted, before a byte is read.
            log.warning("closing connection from %s: it already has the %d connections max_connections_per_ip "
                        "allows", host, self.per_ip.limit(host))
            self.peer_host = host
            self.state = ConnectionState.CLOSING
            transport.abort()
            return
        self.registry.add(self)
        metrics.connection_opened()
        super().connection_made(transport)

    def connection_lost(self, exc) -> None:
        if not self._counted:
            self.state = ConnectionState.CLOSED
            return
        self.per_ip.release(self.peer_host)
        self.registry.discard(self)
        metrics.connection_closed()
        super().connection_lost(exc)
