"""The `kgc` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from coordinator.config import GroupConfig, ServerConfig

log = logging.getLogger("kgc")


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _upstreams(text: str) -> tuple[tuple[str, int], ...]:
    return tuple(_host_port(part) for part in text.split(",") if part)


def _broker_port(text: str) -> tuple[int, int]:
    node, sep, port = text.partition("=")
    if not sep or not node.lstrip("-").isdigit() or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected NODE_ID=PORT, got {text!r}")
    return int(node), int(port)


def _serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="run the group coordinator")
    d = ServerConfig()
    g = GroupConfig()
    p.add_argument("--host", default=d.host, help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=d.port, help="bootstrap/coordinator port (default %(default)s)")
    p.add_argument("--advertised-host", default=None, help="host clients should connect to (default: --host)")
    p.add_argument("--node-id", type=int, default=d.node_id, help="kgc's own node id (default %(default)s)")
    p.add_argument("--data-dir", default=None, help="directory of the 50-partition log (default: in memory)")
    p.add_argument("--fsync", default=d.fsync, help="always | interval:<ms> | never (default %(default)s)")
    p.add_argument("--upstream", type=_upstreams, default=(), help="HOST:PORT[,HOST:PORT...] of the Kafka cluster")
    p.add_argument("--broker-port-base", type=int, default=d.broker_port_base,
                   help="kgc listener for upstream broker N is this + N (default %(default)s)")
    p.add_argument("--broker-port", type=_broker_port, action="append", default=[],
                   help="NODE_ID=PORT: an explicit kgc listener port for one upstream broker (repeatable)")
    p.add_argument("--initial-rebalance-delay-ms", type=int, default=g.initial_rebalance_delay_ms)
    p.add_argument("--min-session-timeout-ms", type=int, default=g.min_session_timeout_ms)
    p.add_argument("--max-session-timeout-ms", type=int, default=g.max_session_timeout_ms)
    p.add_argument("--group-max-size", type=int, default=g.group_max_size)
    p.add_argument("--offsets-retention-ms", type=int, default=g.offsets_retention_ms)
    p.add_argument("--log-level", default="INFO")


def _config_from(args) -> ServerConfig:
    group = GroupConfig(
        initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        min_session_timeout_ms=args.min_session_timeout_ms,
        max_session_timeout_ms=args.max_session_timeout_ms,
        group_max_size=args.group_max_size,
        offsets_retention_ms=args.offsets_retention_ms,
    )
    return ServerConfig(
        host=args.host, port=args.port, advertised_host=args.advertised_host, node_id=args.node_id,
        data_dir=args.data_dir, fsync=args.fsync, upstream=args.upstream,
        broker_port_base=args.broker_port_base, broker_ports=tuple(args.broker_port), group=group,
    )


async def _serve(config: ServerConfig) -> None:
    from coordinator.app import KgcApp

    app = KgcApp(config)
    await app.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"kgc serving on {config.advertised}:{app.port}", flush=True)
    await stop.wait()
    log.info("shutting down")
    await app.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kgc", description="Kafka group coordinator")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.command == "serve":
        try:
            import uvloop
        except ImportError:
            asyncio.run(_serve(_config_from(args)))
        else:
            uvloop.run(_serve(_config_from(args)))
    return 0
