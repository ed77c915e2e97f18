"""A TLS front for a plaintext broker: accepts TLS on loopback and relays the bytes.

The bundled Tansu cannot serve TLS, so upstream-TLS tests put this in front of it and
start Tansu advertising the relay's port (`TansuBroker(advertised_port=relay.port)`), so
every connection kgc makes upstream, control and per-broker, goes through TLS. Without a
context it relays plain TCP: an upstream address that starts answering when a test says."""

from __future__ import annotations

import asyncio
import contextlib
import ssl


class LoopbackTlsServer:
    """A TLS server on 127.0.0.1:`port` in front of `target`; subclasses serve connections."""

    def __init__(self, context: ssl.SSLContext | None, port: int):
        self._context = context
        self.port = port
        self.target: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self, target: tuple[str, int]):
        self.target = target
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, ssl=self._context)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            await self._server.wait_closed()


class TlsRelay(LoopbackTlsServer):
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            pumps = [asyncio.ensure_future(_pump(reader, up_writer)), asyncio.ensure_future(_pump(up_reader, writer))]
            self._tasks.update(pumps)
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pumps:
                pump.cancel()
                self._tasks.discard(pump)
            up_writer.close()
        writer.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ssl.SSLError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
