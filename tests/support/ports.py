"""Free loopback ports for the servers a test starts, each handed out once per test run.

A port is free when asked for and taken only when the server binds it, so two servers
started by one test can both be handed the same port (the kernel may give a just-released
port again): a kgc once got the same number for its listener and its HTTP server and
refused to start. Remembering what was handed out rules that out within the run."""

from __future__ import annotations

import socket
import threading

from coordinator.embedded import HOST

_handed_out: set[int] = set()
_lock = threading.Lock()
_ATTEMPTS = 1000


def free_port(host: str = HOST) -> int:
    return free_port_on((host,))


def free_port_on(hosts: tuple[str, ...]) -> int:
    """A port free on every one of `hosts` (each node of a cluster uses the same ports),
    never handed out before in this run."""
    with _lock:
        for _ in range(_ATTEMPTS):
            with socket.socket() as first:
                first.bind((hosts[0], 0))
                port = first.getsockname()[1]
                if port in _handed_out:
                    continue
                try:
                    for host in hosts[1:]:
                        with socket.socket() as other:
                            other.bind((host, port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no port free on all of {hosts} that this run has not handed out already")
