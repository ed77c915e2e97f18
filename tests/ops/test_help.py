"""`--help` reads the same across subcommands: each says what it does, every option says
what it means, and positional arguments are named in capitals."""

from __future__ import annotations

import argparse

import pytest

from coordinator.bench.__main__ import build_parser as bench_parser
from coordinator.cli import build_parser, main
from coordinator.offline.bench import build_parser as offline_bench_parser
from coordinator.offline.cli import build_parser as offline_parser


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


ENTRY_POINTS = {"kgc": build_parser, "kgc-offline": offline_parser, "python -m coordinator.bench": bench_parser,
                "python -m coordinator.offline.bench": offline_bench_parser}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_no_parser_takes_an_abbreviated_option(entry):
    # argparse would take `--standalon` as `--standalone`, and a typo as some other flag.
    for path, parser in every_parser(ENTRY_POINTS[entry](), entry):
        assert parser.allow_abbrev is False, path


def test_a_misspelt_flag_is_refused_with_the_usage_of_its_own_command(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["serve", "--standalon", "--print-config"])
    err = capsys.readouterr().err
    assert refused.value.code == 2
    assert err.startswith("usage: kgc serve [-h]") and "kgc serve: error: unrecognized arguments: --standalon" in err
    with pytest.raises(SystemExit):
        main(["groups", "list", "--bogus"])
    assert capsys.readouterr().err.startswith("usage: kgc groups list [-h]")


def test_a_misspelt_command_is_refused_with_a_usage_that_names_every_command(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["inspct", "./data"])
    err = capsys.readouterr().err
    assert refused.value.code == 2
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"serve", "groups", "inspect", "audit", "compact", "repair", "bench"} <= commands.keys()
    usage = err.split("\n\n")[0]
    for command in commands:
        assert command in usage, (command, err)
