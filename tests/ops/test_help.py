"""`--help` reads the same across subcommands: each says what it does, every option says
what it means, and positional arguments are named in capitals."""

from __future__ import annotations

import argparse

import pytest

from coordinator.cli import build_parser


def every_parser(parser: argparse.ArgumentParser, path: str = "kgc"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from every_parser(sub, f"{path} {name}")


PARSERS = dict(every_parser(build_parser()))


@pytest.mark.parametrize("path", sorted(PARSERS))
def test_help_is_complete_and_consistent(path):
    parser = PARSERS[path]
    assert parser.description, f"{path}: no description"
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help != argparse.SUPPRESS, f"{path} {name}: no help"
        if not action.option_strings:
            assert (action.metavar or action.dest).isupper(), f"{path} {name}: positional not in capitals"
