"""Driving kgc with a blocking KafkaSocket from an async test: the socket's work in a thread,
and requests pipelined in one write."""

from __future__ import annotations

import asyncio

from tests.support.security import KafkaSocket


def in_thread(fn):
    return asyncio.to_thread(fn)


def pipelined(s: KafkaSocket, *requests) -> None:
    """Send `requests` in one write: kgc reads them together, before answering any."""
    frames = []
    for number, request in enumerate(requests, 1):
        request.with_header(correlation_id=100 + number, client_id="kgc-test")
        frames.append(bytes(request.encode(header=True, framed=True)))
    s.sock.sendall(b"".join(frames))
