"""Listeners: the bootstrap/coordinator listener and, with an upstream, one per broker."""

from __future__ import annotations

import asyncio
import logging
import socket

from coordinator import metrics
from coordinator.net.connection import KafkaConnection
from coordinator.security.tls import HANDSHAKE_TIMEOUT_S, ServerTls

log = logging.getLogger(__name__)


class Listener:
    """A TCP listener whose connections speak for one node (None: the bootstrap listener)."""

    def __init__(self, host: str, port: int, *, listener_node_id: int | None,
                 max_frame_bytes: int, max_in_flight: int, tls: ServerTls | None = None):
        self._dispatcher = None
        self._tls = tls
        self._sock: socket.socket | None = None
        self._host = host
        self._port = port
        self._node_id = listener_node_id
        self._max_frame_bytes = max_frame_bytes
        self._max_in_flight = max_in_flight
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()

    def _make_connection(self) -> KafkaConnection:
        conn = _TrackedConnection(self._dispatcher, max_frame_bytes=self._max_frame_bytes,
                                  max_in_flight=self._max_in_flight, listener_node_id=self._node_id,
                                  tls=self._tls is not None)
        conn.registry = self._connections
        return conn

    def bind(self) -> int:
        """Bind before serving, so the port (maybe ephemeral) is known to what answers for it."""
        self._sock = socket.create_server((self._host, self._port), reuse_port=False)
        self._port = self._sock.getsockname()[1]
        return self._port

    async def serve(self, dispatcher) -> None:
        self._dispatcher = dispatcher
        loop = asyncio.get_running_loop()
        if self._tls is None:
            self._server = await loop.create_server(self._make_connection, sock=self._sock)
        else:
            self._server = await loop.create_server(self._make_connection, sock=self._sock, ssl=self._tls.context,
                                                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        log.info("listening on %s:%d (%s%s)", self._host, self._port,
                 "bootstrap/coordinator" if self._node_id is None else f"broker {self._node_id}",
                 ", TLS" if self._tls is not None else "")

    @property
    def port(self) -> int:
        return self._port

    async def stop_accepting(self) -> None:
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
    __slots__ = ("registry",)

    def connection_made(self, transport) -> None:
        self.registry.add(self)
        metrics.connection_opened()
        super().connection_made(transport)

    def connection_lost(self, exc) -> None:
        self.registry.discard(self)
        metrics.connection_closed()
        super().connection_lost(exc)
