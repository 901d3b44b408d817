"""`python -m chaos`: one sub-command per module in this package.

Each command module exposes ``add_parser(subparsers)`` (which registers its
sub-parser and sets ``func``) and its ``func(args) -> int``. Exit codes follow
Jepsen's: 0 matches the expectation (or none is set), 1 mismatch, 2 unknown,
254 bad arguments, 255 internal error.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from chaos.errors import (  # noqa: F401 - re-exported for the command modules
    EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, BadArguments)

# One line per sub-command module (chaos/cli/<module>.py).
COMMAND_MODULES = [
    "chaos.cli.list_cmd",      # list, describe
    "chaos.cli.run_cmd",       # run, matrix
    "chaos.cli.cluster_cmd",   # cluster up|down|status
    "chaos.cli.proxy_cmd",     # proxy serve
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default exit code 2 means "unknown" here
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_ARGS)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m chaos", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if hasattr(args, "server"):   # run, matrix, cluster up: refuse an unknown server before anything starts
            from chaos.cluster.servers import use_server
            use_server(args.server)
        if hasattr(args, "topology"):  # replica | sentinel[:k=v]: bad parameters or no Sentinel binary refused here
            from chaos.cluster.sentinel import use_topology
            use_topology(args.topology)
        return int(args.func(args) or 0)
    except BadArguments as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - the contract is exit code 255 with the traceback
        traceback.print_exc()
        return EXIT_INTERNAL
