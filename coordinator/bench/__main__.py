"""`python -m coordinator.bench run|compare ...`: `kgc bench` before the CLI wires it in."""

import argparse
import logging
import sys

from coordinator.arguments import finish_parsers, parse
from coordinator.bench.cli import add_bench_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coordinator.bench")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    return finish_parsers(parser)


if __name__ == "__main__":
    args = parse(build_parser(), ["bench", *sys.argv[1:]])
    args.prog_name = "python -m coordinator.bench"
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(args.handler(args))
