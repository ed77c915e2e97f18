"""Metrics labels come from closed sets: thousands of distinct (api key, version) pairs
sent to `kgc serve` over real sockets grow neither its Prometheus series nor its memory."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from coordinator import metrics
from coordinator.bench.wire import BenchConnection
from tests.support.kgc import free_port, kgc_process, rss_bytes
from tests.support.kgc_http import Samples, get

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

API_VERSIONS = 18


def frame(api_key: int, version: int, correlation_id: int) -> bytes:
    body = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"card"
    if api_key == API_VERSIONS and version >= 3:
        body += b"\x00"     # request header v2: no tagged fields
    return struct.pack(">i", len(body)) + body


async def api_versions_at(port: int, versions: range) -> None:
    """ApiVersions at each version on one connection, pipelined: every one above kgc's
    range is answered (KIP-511's v0 answer), so the connection stays open."""
    conn = await BenchConnection.open("127.0.0.1", port)
    try:
        for start in range(versions.start, versions.stop, 2000):
            waits = []
            for version in range(start, min(start + 2000, versions.stop)):
                cid = conn.next_correlation_id()
                waits.append(conn.send(frame(API_VERSIONS, version, cid), cid))
            await asyncio.wait_for(asyncio.gather(*waits), 30)
    finally:
        conn.close()


def unknown_api_keys(port: int, keys: range) -> None:
    """Each unknown key closes its connection (nothing to forward to)."""
    for key in keys:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(frame(key, 0, 1))
            while s.recv(4096):
                pass


def request_series(text: str) -> int:
    samples = Samples.parse(text)
    return sum(1 for name, _ in samples.values if name.startswith("kgc_request"))


async def test_thousands_of_distinct_api_key_and_version_pairs_grow_neither_series_nor_memory(tmp_path):
    http_port = free_port()
    with kgc_process("--http-port", str(http_port), log_path=str(tmp_path / "kgc.log")) as kgc:
        # warm up: every kind of label the attack will use exists once, allocator settled
        await api_versions_at(kgc.port, range(0, 3))
        await api_versions_at(kgc.port, range(5, 3_000))
        unknown_api_keys(kgc.port, range(900, 910))
        _, text = await get(http_port, "/metrics")
        series, rss = request_series(text), rss_bytes(kgc.proc.pid)
        # when a client sends 29,000 more distinct pairs
        await api_versions_at(kgc.port, range(3_000, 32_000))
        unknown_api_keys(kgc.port, range(1_000, 1_200))
        _, text = await get(http_port, "/metrics")
        grown = rss_bytes(kgc.proc.pid) - rss
        # then no series was added and memory stayed flat (a tally per pair was ~550 B)
        assert request_series(text) == series
        assert grown < 2 * 2**20, f"RSS grew {grown} bytes"
        assert 'version="unknown"' in text and 'api="unknown"' in text


def test_only_pairs_the_protocol_defines_get_their_own_tally():
    assert metrics.request(API_VERSIONS, 3) is metrics.request(API_VERSIONS, 3)
    assert (metrics.request(API_VERSIONS, 3).api, metrics.request(API_VERSIONS, 3).version) == ("ApiVersions", "3")
    before = len(metrics._requests)
    for version in range(100, 5_000):
        assert metrics.request(API_VERSIONS, version).version == "unknown"
    for key in range(2_000, 3_000):
        assert (metrics.request(key, 0).api, metrics.request(key, 0).version) == ("unknown", "unknown")
    assert len(metrics._requests) == before
    assert len(metrics._unknown_versions) <= 2 + len(metrics._requests)
