"""`python -m chaos`: one sub-command per module in this package.

Each command module exposes ``add_parser(subparsers)`` (which registers its
sub-parser and sets ``func``) and its ``func(args) -> int``. Exit codes follow
Jepsen's: 0 matches the expectation (or none is set), 1 mismatch, 2 unknown,
254 bad arguments, 255 internal error. Whatever goes wrong prints one line, never a bare
traceback (chaos/cli/failures.py). Installed, the same command is `streams-chaos` (not
`chaos`: Chaos Toolkit has that name); with no arguments it prints its help.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from chaos.errors import (  # noqa: F401 - re-exported for the command modules
    EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, BadArguments)

from chaos import extensions
from chaos.cli import failures

# One line per sub-command module (chaos/cli/<module>.py).
COMMAND_MODULES = [
    "chaos.cli.list_cmd",      # list, describe
    "chaos.cli.run_cmd",       # run, matrix
    "chaos.cli.cluster_cmd",   # cluster up|down|status
    "chaos.cli.proxy_cmd",     # proxy serve
    "chaos.cli.scorecard_cmd", # scorecard
    "chaos.cli.mutants_cmd",   # mutants
]


DESCRIPTION = ("Run presets, faults and your own consumer under faults on a real Redis + PostgreSQL "
               "topology, and judge what was lost, duplicated or reordered.")
EPILOG = ("`%(prog)s COMMAND --help` describes a command. Exit codes: 0 as expected, 1 mismatch, 2 unknown "
          "(the rig broke), 254 bad arguments, 255 internal error.")
EXIT_SIGPIPE = 128 + 13   # what a shell reports for a tool that SIGPIPE ended


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default exit code 2 means "unknown" here
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_ARGS)


def _prog() -> str:
    """`streams-chaos` when run as the console script, else `python -m chaos`."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name and not name.endswith(".py") and name != "-c" else "python -m chaos"


def build_parser() -> argparse.ArgumentParser:
    from chaos import __version__
    parser = _Parser(prog=_prog(), description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def _check_topology_options(args: argparse.Namespace) -> None:
    """run, matrix, scorecard, cluster up: the edge reads the backend configuration once
    (`--backend`/`--topology`/`--server`, else $CHAOS_BACKEND/$CHAOS_TOPOLOGY/$CHAOS_SERVER)
    into ``args``, from where it is passed on as objects; an unknown server, bad topology
    parameters or a missing Sentinel binary are refused before anything starts (bad input)."""
    if not hasattr(args, "topology") and not hasattr(args, "server"):
        return
    from chaos.cluster import configured
    from chaos.cluster.errors import ClusterError
    try:
        where = configured(getattr(args, "backend", None), getattr(args, "topology", None),
                           getattr(args, "server", None))
    except ClusterError as exc:
        raise BadArguments(str(exc)) from None
    args.backend, args.topology, args.server = where.backend, where.topology, where.server


def main(argv: list[str] | None = None) -> int:
    try:
        extensions.load_plugins()   # $CHAOS_PLUGINS: a team's faults, guards, presets (chaos/extensions.py)
        parser = build_parser()     # (imports the registries: a bad entry point is refused here)
    except BadArguments as exc:
        return failures.bad_input(exc)
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help()
        return EXIT_OK
    args = parser.parse_args(argv)
    try:
        _check_topology_options(args)
        code = int(args.func(args) or 0)
        sys.stdout.flush()   # a reader that left (`list --json | head`) shows here, not at exit
        return code
    except BrokenPipeError:
        return _reader_left()
    except BadArguments as exc:
        return failures.bad_input(exc)
    except KeyboardInterrupt:
        where = failures.crash_site.run_dir
        kept = f": the cell's run dirs so far are in {where}" if where is not None and where.is_dir() else ""
        print(f"interrupted{kept}", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a rig failure (2) or a crash (255): one line, traceback kept
        return failures.failure(exc, args)
    finally:
        _stop_fork_server()


def _reader_left() -> int:
    """The pipe's reader closed it (`... | head`): stop quietly, as a tool killed by SIGPIPE
    would (exit 141), and point stdout at /dev/null so that the exit's flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_SIGPIPE


def _stop_fork_server() -> None:
    """The workers' fork server is process-wide (chaos.workload.forkserver): stop and reap it
    before the command returns, so nothing of the command outlives it (not even for a moment)."""
    module = sys.modules.get("chaos.workload.forkserver")   # not imported: never started
    if module is not None:
        try:
            module.close_fork_server()
        except KeyboardInterrupt:   # a second Ctrl-C: the server still dies on EOF when we exit
            pass
