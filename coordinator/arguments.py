"""What every command-line parser of kgc's entry points shares.

Abbreviations are off: argparse would otherwise take `--standalon` for `--standalone`
and a typo for whichever flag it happens to prefix, silently. Each parser records itself
as `command_parser`, so an argument it does not know is reported with the usage of the
command that was given (`kgc serve: error: ...`), not the top level's.
"""

from __future__ import annotations

import argparse


def finish_parsers(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` and every subcommand parser under it, set as above."""
    for each in _every_parser(parser):
        each.allow_abbrev = False
        each.set_defaults(command_parser=each)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser.parse_args`, with unknown arguments refused by the command they were given to."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _every_parser(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _every_parser(sub)
