"""Kafka's bounds on connections that have not logged in, or do nothing: a frame before
login is at most `sasl_server_max_receive_size` (judged on its announced size, before its
body is read), a connection idle past `connections_max_idle_ms` is closed, and one address
opens at most `max_connections_per_ip` connections. Together they keep what 1,000
connections that never log in cost kgc bounded."""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time

import pytest
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.consumer.group import JoinGroupRequest
from kafka.protocol.metadata import ApiVersionsRequest

from protocol.errors import ErrorCode
from tests.support.blocking_socket import in_thread
from tests.support.kgc import kgc_process, rss_bytes
from tests.support.sasl_terminate import PASSWORDS, sasl_kgc
from tests.support.security import KafkaSocket, credentials_file

LOGIN_LIMIT = 524_288       # Kafka's sasl.server.max.receive.size default


def announce(size: int, body: bytes = b"") -> bytes:
    """The start of an ApiVersions frame announcing `size` bytes: a header kgc reads first."""
    return struct.pack(">ihhih", size, 18, 3, 1, 1) + b"t" + body


def join_with_metadata(metadata: bytes) -> JoinGroupRequest:
    cls = JoinGroupRequest[3]
    return cls(group_id="big", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
               group_instance_id=None, protocol_type="consumer",
               protocols=[cls.JoinGroupRequestProtocol(name="range", metadata=metadata)])


async def test_a_frame_over_the_login_limit_closes_the_connection_at_its_header(tmp_path):
    async with sasl_kgc(tmp_path) as app:
        def scenario():
            with KafkaSocket(app.port) as s:
                s.send_until_closed(announce(64 * 2**20, b"\0" * 65_536))     # 64 MiB announced, 64 KiB sent
                assert s.closed_by_peer()
            with KafkaSocket(app.port) as s:
                assert s.handshake("PLAIN").error_code == ErrorCode.NONE
                s.sock.sendall(announce(LOGIN_LIMIT + 1))                 # during the login, too
                assert s.closed_by_peer()
            with KafkaSocket(app.port) as s:                             # after it, the usual limit
                assert s.login_plain("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
                assert s.call(join_with_metadata(b"m" * (2 * LOGIN_LIMIT))).error_code == ErrorCode.NONE

        await in_thread(scenario)


async def test_an_idle_connection_is_closed_and_a_busy_one_is_not(tmp_path):
    async with sasl_kgc(tmp_path, connections_max_idle_ms=300) as app:
        def scenario():
            with KafkaSocket(app.port) as idle, KafkaSocket(app.port) as busy:
                assert busy.login_plain("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
                started = time.monotonic()
                while time.monotonic() - started < 1.0:                  # past the limit, talking
                    assert busy.call(ListGroupsRequest[4](states_filter=[])).error_code == ErrorCode.NONE
                    time.sleep(0.1)
                assert idle.closed_by_peer()
                assert busy.call(ListGroupsRequest[4](states_filter=[])).error_code == ErrorCode.NONE

        await in_thread(scenario)


async def test_one_address_opens_at_most_max_connections_per_ip(tmp_path):
    async with sasl_kgc(tmp_path, max_connections_per_ip=2) as app:
        def versions(s: KafkaSocket) -> int:
            return s.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1")).error_code

        def scenario():
            with KafkaSocket(app.port) as first, KafkaSocket(app.port) as second:
                assert versions(first) == versions(second) == ErrorCode.NONE
                with KafkaSocket(app.port) as third:
                    assert third.closed_by_peer()
            with KafkaSocket(app.port) as again:          # the count went down with the closes
                assert versions(again) == ErrorCode.NONE

        await in_thread(scenario)


async def test_overrides_raise_the_limit_for_one_address(tmp_path):
    async with sasl_kgc(tmp_path, max_connections_per_ip=0,
                        max_connections_per_ip_overrides=(("127.0.0.1", 1),)) as app:
        def scenario():
            with KafkaSocket(app.port) as first:
                assert first.handshake("PLAIN").error_code == ErrorCode.NONE
                with KafkaSocket(app.port) as second:
                    assert second.closed_by_peer()

        await in_thread(scenario)


CONNECTIONS = 1_000
SENT_EACH = 128 * 1024       # of a 64 MiB frame: what main kept buffering, per connection
RSS_BOUND = 48 * 2**20       # kgc's growth under both waves; main grew by over 128 MiB


def closed_within(socks: list[socket.socket], timeout_s: float) -> int:
    """How many of `socks` the peer closes (EOF or reset) within `timeout_s`, all watched at once."""
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        count, deadline = 0, time.monotonic() + timeout_s
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
                selector.unregister(key.fileobj)
                try:
                    count += key.fileobj.recv(1) == b""
                except ConnectionResetError:
                    count += 1
        return count


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_memory_stays_bounded_under_1000_connections_that_never_log_in(tmp_path):
    users = credentials_file(tmp_path / "users.toml", PASSWORDS)
    with kgc_process("--security-protocol", "sasl_plaintext", "--sasl-credentials-file", users,
                     log_path=str(tmp_path / "kgc.log")) as kgc:
        with KafkaSocket(kgc.port) as warm:
            assert warm.login_plain("alice", PASSWORDS["alice"]).error_code == ErrorCode.NONE
        before = rss_bytes(kgc.proc.pid)

        # Wave 1: each announces a 64 MiB frame and sends 128 KiB of it, then waits.
        flood = []
        for _ in range(CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", kgc.port), timeout=10)
            with contextlib.suppress(OSError):       # kgc may close before it is all sent
                sock.sendall(announce(64 * 2**20, b"\0" * SENT_EACH))
            flood.append(sock)
        refused = closed_within(flood, 15.0)
        after_flood = rss_bytes(kgc.proc.pid)
        for sock in flood:
            sock.close()

        # Wave 2: 1,000 connections that say nothing at all, held open.
        quiet = [socket.create_connection(("127.0.0.1", kgc.port), timeout=10) for _ in range(CONNECTIONS)]
        with KafkaSocket(kgc.port) as probe:       # kgc has taken them all in
            assert probe.call(ApiVersionsRequest[3](client_software_name="t",
                                                    client_software_version="1")).error_code == ErrorCode.NONE
        with_quiet = rss_bytes(kgc.proc.pid)
        for sock in quiet:
            sock.close()

        print(f"\nkgc RSS: {before / 2**20:.1f} MiB before, {after_flood / 2**20:.1f} MiB after "
              f"{CONNECTIONS} oversized frames ({refused} closed at the header), {with_quiet / 2**20:.1f} MiB "
              f"with {CONNECTIONS} silent connections open")
        assert refused == CONNECTIONS
        assert max(after_flood, with_quiet) - before < RSS_BOUND
