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
    return _free_run(hosts, 1)


def free_port_run(count: int, host: str = HOST) -> int:
    """The first of `count` consecutive ports, each free and never handed out before in this
    run (`kgc serve --processes N` listens on port + i)."""
    return _free_run((host,), count)


def _free_run(hosts: tuple[str, ...], count: int) -> int:
    """The first of `count` consecutive ports free on every one of `hosts`, from a port the
    kernel picks on the first; none of them handed out before, all of them handed out now."""
    with _lock:
        for _ in range(_ATTEMPTS):
            with socket.socket() as probe:
                probe.bind((hosts[0], 0))
                first = probe.getsockname()[1]
            run = range(first, first + count)
            if run[-1] > 65535 or _handed_out.intersection(run) or not all(
                    _bindable(host, port) for host in hosts for port in run):
                continue
            _handed_out.update(run)
            return first
    raise RuntimeError(f"no {count} consecutive port(s) free on all of {hosts} that this run has not handed out")


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
