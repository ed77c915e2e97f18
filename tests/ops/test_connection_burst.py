"""A burst of new connections, as when every consumer of a cluster reconnects at once (kgc
restarted, or 200 members of one group finding their coordinator together): the kernel
completes each handshake while kgc's event loop is busy elsewhere, so no client waits for
a SYN retransmit (1, 3, 7, 15 s). The listen queue must hold the burst: asyncio's default
of 100 did not, and a group of 200 Java members then waited up to 14 s to connect to its
coordinator.

kgc is SIGSTOPped for the burst: the queue alone holds the connections then, as it does
while the loop is busy."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import time

from tests.support.kgc import KgcProcess

BURST = 500
WAIT_S = 0.5        # well under the first SYN retransmit (1 s)


def connected_within(port: int, count: int, wait_s: float) -> int:
    """How many of `count` connections opened at once complete their handshake in time."""
    pending: dict[int, socket.socket] = {}
    done = 0
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            pending[s.fileno()] = s
        poller = select.poll()
        for fd in pending:
            poller.register(fd, select.POLLOUT)
        deadline = time.monotonic() + wait_s
        open_fds = set(pending)
        while open_fds and time.monotonic() < deadline:
            for fd, _ in poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                poller.unregister(fd)
                open_fds.discard(fd)
                if pending[fd].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    done += 1
        return done
    finally:
        for s in pending.values():
            with contextlib.suppress(OSError):
                s.close()


def test_a_burst_of_connections_is_queued_while_kgc_cannot_accept(tmp_path):
    kgc = KgcProcess("--data-dir", str(tmp_path / "data"), "--log-level", "WARNING",
                     log_path=str(tmp_path / "kgc.log")).start()
    assert kgc.proc is not None
    try:
        os.kill(kgc.proc.pid, signal.SIGSTOP)
        try:
            connected = connected_within(kgc.port, BURST, WAIT_S)
        finally:
            os.kill(kgc.proc.pid, signal.SIGCONT)
        assert connected == BURST
        # And kgc serves on once it runs again.
        with socket.create_connection(("127.0.0.1", kgc.port), 5):
            pass
    finally:
        kgc.stop()
