"""`kgc serve`: the process around a `KgcApp`: the upstream choice, the event loop,
signals, the collector's tuning and the embedded broker's watcher.

The first SIGTERM or SIGINT stops the app gracefully (`KgcApp.stop`); a second one exits
at once, stopping the embedded broker by PID first.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable

from coordinator.app import CannotStart, KgcApp, started
from coordinator.commands.processes import die_with_parent
from coordinator.embedded import MEMORY_STORAGE_WARNING, EmbeddedBroker, choose_upstream
from coordinator.runtime.partition_state import PartitionState, failed_to_load
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.settings import ServerConfig

log = logging.getLogger(__name__)


class ShutdownSignals:
    """The first SIGTERM or SIGINT asks for a graceful stop; the next one exits at once."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, on_first: Callable[[], None], on_second: Callable[[int], None]):
        self._on_first = on_first
        self._on_second = on_second
        self.received = 0
        self._loop = asyncio.get_running_loop()
        for sig in self.SIGNALS:
            self._loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: int) -> None:
        self.received += 1
        name = signal.Signals(sig).name
        if self.received == 1:
            log.info("%s: stopping gracefully (send it again to exit at once)", name)
            self._on_first()
        else:
            log.warning("%s again: exiting at once", name)
            self._on_second(sig)

    def remove(self) -> None:
        for sig in self.SIGNALS:
            self._loop.remove_signal_handler(sig)


# The cyclic garbage collector's first threshold (CPython's default is 700). Requests
# allocate many short-lived containers that reference counting frees anyway; at 700 the
# collector ran often enough to be a large share of the OffsetCommit path's CPU
# (docs/benchmarks/notes.md, "OffsetCommit path"). Only `kgc serve` sets it: it is a process-wide choice.
GC_GEN0_THRESHOLD = 10_000
# Its third (CPython's default is 10): a full collection walks every object that is not
# frozen, which holds the loop for as long as that takes. A request naming hundreds of
# thousands of partitions or groups keeps that many objects alive across collections, so
# at 10 it brought several full collections, each one a stall of every other member's
# heartbeat (BENCHMARKS.md, "Large requests"). kgc's garbage is freed by reference
# counting but for rare cycles, which wait ten times as long.
GC_GEN2_THRESHOLD = 100

EMBEDDED_WATCH_INTERVAL_S = 1.0
SERVING_LINE_WAIT_S = 5.0  # how long the "serving on" line waits to name the broker listeners


async def run_until_signalled(config: ServerConfig, on_second_signal: Callable[[int], None],
                              broker: EmbeddedBroker | None = None) -> None:
    stop = asyncio.Event()
    signals = ShutdownSignals(stop.set, on_second_signal)
    app = KgcApp(config)
    if broker is not None:
        app.warnings.append(MEMORY_STORAGE_WARNING)
    gc.set_threshold(GC_GEN0_THRESHOLD, gc.get_threshold()[1], GC_GEN2_THRESHOLD)
    frozen = watcher = None
    try:
        await app.start()
        print(await serving_line(app, stop), flush=True)
        frozen = asyncio.create_task(_freeze_when_loaded(started(app.runtime, "the runtime")))
        if broker is not None:
            watcher = asyncio.create_task(_watch_embedded(broker))
        await stop.wait()
    finally:
        for task in (frozen, watcher):
            if task is not None:
                task.cancel()
        await app.stop()
        signals.remove()
    log.info("stopped")


async def serving_line(app: KgcApp, stop: asyncio.Event) -> str:
    """Where clients connect: the bootstrap listener and, with an upstream, each broker's
    listener (they open as the upstream's brokers are learnt: waited for, within a bound)."""
    config = app.config
    brokers = ""
    if app.cluster is not None:
        reached = asyncio.ensure_future(app.cluster.wait_reachable())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([reached, stopping], timeout=SERVING_LINE_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        for task in (reached, stopping):
            task.cancel()
        ports = app.broker_ports
        brokers = (" (" + ", ".join(f"broker {node} on {config.advertised}:{port}" for node, port in sorted(ports.items()))
                   + ")" if ports else " (upstream not reached yet: a listener opens for each broker as it is found)")
    http = f"; HTTP on {config.http_host}:{app.http.port}" if app.http is not None else ""
    which = "" if config.process_index is None else f"; process {config.process_index} of {config.processes}"
    return f"kgc serving on {config.advertised}:{app.port}{brokers}{http}{which}"


async def _freeze_when_loaded(runtime: CoordinatorRuntime) -> None:
    # What the load built (every group and offset) lives until it is replaced: the
    # collector need not walk it again on every full collection.
    await runtime.wait_loaded()
    gc.freeze()
    # One line for the load; each partition's own lines are at DEBUG.
    stats = runtime.stats()
    total = len(runtime.owned)      # replicated: none until the ownership gives some
    failed = sum(1 for p in runtime.owned if runtime.partition_state(p) is not PartitionState.ACTIVE)
    log.info("loaded %d of %d partitions (%d records; slowest %.0f ms)", total - failed, total,
             sum(s.records_loaded for s in stats), max((s.last_load_ms or 0 for s in stats), default=0))
    if failed:
        log.error("%s (the errors above say why; /readyz lists them)", failed_to_load(failed, total))


async def _watch_embedded(broker: EmbeddedBroker) -> None:
    # The embedded broker is our child: if it dies on its own, say why once and reap it.
    # /readyz already reports the upstream unreachable; restarting it would bring back an
    # empty cluster (memory storage) without anyone asking, so kgc does not.
    while (code := broker.exit_code()) is None:
        await asyncio.sleep(EMBEDDED_WATCH_INTERVAL_S)
    log.error("embedded upstream (pid %d) exited with %s: forwarded requests fail until kgc is restarted; "
              "its last output:\n%s", broker.pid, code, broker.log_text())


def serve(config: ServerConfig) -> int:
    """`kgc serve`: the upstream (configured, embedded, or none), the event loop, until a signal."""
    if config.process_index is not None:
        die_with_parent()   # one of `kgc serve --processes N`'s: the upstream was chosen there
    config, broker = choose_upstream(config, standalone=config.standalone)

    def exit_now(sig: int) -> None:
        if broker is not None:
            broker.kill()
        os._exit(128 + sig)

    cannot_start = None
    try:
        _run(run_until_signalled(config, exit_now, broker))
    except CannotStart as exc:
        cannot_start = exc
    finally:
        if broker is not None:
            broker.close()
    if cannot_start is not None:
        # After the embedded broker's own last line: the reason kgc stopped is what is read last.
        print(f"kgc serve: {cannot_start}", file=sys.stderr)
        return 2
    return 0


def _run(main) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)
