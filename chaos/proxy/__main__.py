"""`python -m chaos.proxy serve ...`: the proxy server alone, the process a cluster starts.

The same command as `python -m chaos proxy serve` (chaos/proxy/command.py), without
loading the framework's other commands, so a cluster start does not wait for them.
Exit codes as the chaos command's: 254 for bad arguments.
"""
from __future__ import annotations

import argparse
import sys

from chaos.errors import EXIT_BAD_ARGS, BadArguments
from chaos.proxy.command import add_serve_parser


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.proxy", description=__doc__.splitlines()[0])
    add_serve_parser(parser.add_subparsers(dest="proxy_command", required=True))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse's usage error is exit 2, which means "unknown verdict" here
        return EXIT_BAD_ARGS if exc.code == 2 else int(exc.code or 0)
    try:
        return args.func(args)
    except BadArguments as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS


if __name__ == "__main__":
    sys.exit(main())
