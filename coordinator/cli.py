"""The `kgc` command line: the subcommands' parsers, assembled from their own modules
(`coordinator.commands`, `coordinator.offline`, `coordinator.bench`).

Each subcommand's parser sets `handler(args) -> exit status`.
"""

from __future__ import annotations

import argparse
import os
import sys

from coordinator.arguments import finish_parsers, parse
from coordinator.bench.cli import add_bench_parser
from coordinator.commands.credentials import add_credentials_parser
from coordinator.commands.demo import add_demo_parser
from coordinator.commands.groups import add_groups_parser
from coordinator.commands.migrate import add_migrate_parsers
from coordinator.commands.serve import add_serve_parser
from coordinator.logging_setup import setup_logging
from coordinator.version import kgc_version

OTHER_COMMANDS_LOG_LEVEL = "WARNING"
BROKEN_PIPE_EXIT = 128 + 13   # 128 + SIGPIPE, as a shell reports a command a closed pipe killed


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser; given the `command` about to run, only what it needs: the
    offline tools' parsers are added only when one of them (or help, or a command not known
    otherwise) is asked for, so `kgc serve` does not import the offline package (nor, through
    it, pyarrow's users)."""
    parser = argparse.ArgumentParser(prog="kgc", description="Kafka group coordinator")
    parser.add_argument("--version", action="version", version=f"kgc {kgc_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(sub)
    add_demo_parser(sub)
    add_groups_parser(sub)
    add_migrate_parsers(sub)
    add_credentials_parser(sub)
    # Also for a command not known yet (a typo): its error's usage then names every command.
    if command not in sub.choices:
        from coordinator.offline.cli import add_subcommands as add_offline_parsers
        from coordinator.offline.inspect import add_inspect_parser
        from coordinator.offline.repair import add_repair_parser

        add_inspect_parser(sub)
        add_repair_parser(sub)
        add_offline_parsers(sub)
    add_bench_parser(sub)
    _describe_from_help(parser)
    return finish_parsers(parser)


def _describe_from_help(parser: argparse.ArgumentParser) -> None:
    """A subcommand without a description of its own gets its one-line help as one, so
    every `kgc ... --help` opens by saying what the command does."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                text = helps.get(name)
                if sub.description is None and text:
                    sub.description = text[0].upper() + text[1:] + "."
                _describe_from_help(sub)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and not argv[0].startswith("-") else None
    args = parse(build_parser(command), argv)
    if args.command != "serve":
        setup_logging(getattr(args, "log_level", OTHER_COMMANDS_LOG_LEVEL), "text")
    try:
        return args.handler(args)
    except BrokenPipeError:
        # The reader went away (`kgc inspect --json | head`): nothing to say to it. Point
        # stdout at /dev/null so the interpreter's last flush does not fail again, and exit
        # as a command killed by SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
