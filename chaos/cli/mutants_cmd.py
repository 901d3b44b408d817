"""`python -m chaos mutants [--json]`: do the rows catch broken strategies? (docs/mutants.md)

Runs each deliberately broken variant (chaos/mutants/) against the rows of the part it
breaks; exit 0 only when every mutant is killed (1 when one survived). `--control` runs
the same rows with the built-in parts: exit 0 only when none of them left its row.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from chaos.cli import failures
from chaos.errors import EXIT_MISMATCH, EXIT_OK, BadArguments


def cmd_mutants(args: argparse.Namespace) -> int:
    from chaos.mutants import MUTANTS, mutant
    from chaos.mutants.runner import run_all
    names = [n.strip() for n in (args.only or "").split(",") if n.strip()]
    for name in names:
        mutant(name)   # an unknown name is bad input, refused before a server starts
    if args.runs < 1 or args.max_cells < 1:
        raise BadArguments(f"--runs {args.runs} and --max-cells {args.max_cells} must be >= 1")
    if args.time_scale <= 0:
        raise BadArguments(f"--time-scale must be > 0, got {args.time_scale}")

    def show(cell: Any) -> None:
        print(f"  {cell.cell}: {cell.outcome} ({cell.verdict}, {cell.wall_s} s)", file=sys.stderr)

    with failures.start_topology(args.backend, f"cli-{os.getpid()}") as cluster:
        report = run_all(cluster, names or None, seed=args.seed, time_scale=args.time_scale, runs=args.runs,
                         max_cells=args.max_cells, control=args.control, on_cell=show)
    if args.json:
        print(json.dumps(report))
    else:
        for m in report["mutants"]:
            if args.control:
                state = f"LEFT by the built-in part: {m['killed_by'][0]}" if m["killed"] else f"kept {len(m['cells'])} rows"
            else:
                state = f"killed by {m['killed_by'][0]}" if m["killed"] else f"SURVIVED {len(m['cells'])} rows"
            print(f"{m['name']} ({m['mutates']}){' control' if args.control else ''}: {state}")
        what = "rows left with the built-in parts" if args.control else "score"
        print(f"{what} {report['killed']}/{report['total']} ({report['score']:.0%}) in {report['wall_s']} s "
              f"({len(MUTANTS)} mutants known)")
    if args.control:   # the built-in parts: every row must have kept its expectation
        return EXIT_OK if report["killed"] == 0 else EXIT_MISMATCH
    return EXIT_OK if report["killed"] == report["total"] else EXIT_MISMATCH


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("mutants", help="run deliberately broken strategies against their rows")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--only", default="", help="comma-separated mutant names (default: all)")
    p.add_argument("--runs", type=int, default=1, help="runs per cell (default 1)")
    p.add_argument("--max-cells", type=int, default=4, help="rows tried per mutant before it survives (default 4)")
    p.add_argument("--seed", type=int, default=0, help="run i uses seed + i (default 0)")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every duration")
    p.add_argument("--control", action="store_true", help="run the same rows with the built-in parts instead: "
                   "a sound row keeps them all (nothing 'killed', exit 1)")
    p.add_argument("--backend", default=None, help="cluster backend: native (default), compose, external")
    p.set_defaults(func=cmd_mutants)
