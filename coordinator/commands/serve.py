"""`kgc serve`'s parser and handler. Every setting of `coordinator.settings.SETTINGS` is
a flag; a flag not given is absent from the parsed arguments, so the file and environment
can supply it (precedence in `settings`). The process itself (`coordinator.commands.process`)
is imported only when `serve` runs, so the other commands start without it."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from coordinator.logging_setup import setup_logging
from coordinator.settings import SETTINGS, ConfigError, boolean, default_of, load_config, render_toml

log = logging.getLogger("kgc")


def add_serve_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="run the group coordinator",
        description="Run the group coordinator. Every setting is a flag, a KGC_* environment variable "
                    "and a key of the --config TOML file; flags win over the environment, which wins "
                    "over the file.")
    p.add_argument("--config", metavar="FILE", default=None, help="TOML file of settings (env KGC_CONFIG)")
    p.add_argument("--print-config", action="store_true",
                   help="print the effective configuration as TOML, each value with its source, and exit")
    for s in SETTINGS:
        default = default_of(s)
        shown = "unset" if default is None else default
        kwargs = {"dest": s.name, "default": argparse.SUPPRESS, "metavar": s.metavar,
                  "help": f"{s.help} (default {shown}; env {s.env})".replace("%", "%%")}
        if s.parse is boolean:
            kwargs.update(nargs="?", const="true", metavar="BOOL")
        elif s.repeatable:
            kwargs.update(action="append")
        p.add_argument(s.option, **kwargs)
    p.set_defaults(handler=run_serve)
    return p


def run_serve(args: argparse.Namespace) -> int:
    from coordinator.commands.process import serve

    flags = {s.name: getattr(args, s.name) for s in SETTINGS if hasattr(args, s.name)}
    try:
        loaded = load_config(flags, os.environ, config_file=args.config)
    except ConfigError as exc:
        print(f"kgc serve: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(render_toml(loaded))
        return 0
    config = loaded.config
    setup_logging(config.log_level, config.log_format, process=config.process_index)
    for warning in loaded.warnings:
        log.warning("%s", warning)
    if config.processes > 1 and config.process_index is None:
        from coordinator.commands.processes import supervise

        return supervise(config, given_flags(args))
    return serve(config)


def given_flags(args: argparse.Namespace) -> list[str]:
    """The flags `kgc serve` was given, as given: what each of its processes is started with
    (the environment and the config file reach them as they reached this one)."""
    argv = [] if args.config is None else ["--config", args.config]
    for s in SETTINGS:
        if hasattr(args, s.name):
            values = getattr(args, s.name) if s.repeatable else [getattr(args, s.name)]
            for value in values:
                argv += [s.option, value]
    return argv
