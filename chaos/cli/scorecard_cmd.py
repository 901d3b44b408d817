"""`python -m chaos scorecard --worker-cmd CMD --worker-config FILE [--faults all|F1,F2]`.

Runs your consumer through every registered fault that fits the topology (docs/scorecard.md),
grades each cell on no_loss, no_duplicate_side_effects, final_state, keeps_consuming,
pel_drains and poison_handled, and writes DIR/index.html (the grid, a page per cell with its
plots and replay command) and DIR/scorecard.json. ``--json`` prints the same object on
stdout. Exit 0 when every bound of the config's ``[expect]`` holds in every cell, 1 when one
breaks, 2 when a promised property could not be judged, 254 on bad input (nothing started).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import uuid
from pathlib import Path
from typing import Any, Callable

from chaos.cli import failures, options
from chaos.errors import BadArguments

DEFAULT_OUT = "reports/scorecard"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("scorecard", help="grade your consumer under every fault that applies to it",
                              description=__doc__.splitlines()[0])
    p.add_argument("--worker-cmd", metavar="CMD", required=True, help="your consumer's command line")
    p.add_argument("--worker-config", metavar="FILE", required=True, help="its worker config (docs/blackbox.md)")
    p.add_argument("--faults", default="all", help="all (default: every registered fault that fits the "
                   "topology) or a comma list of names or specs, e.g. kill-consumer,pause:duration_ms=3000")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"where index.html, the cell pages and scorecard.json go "
                   f"(default {DEFAULT_OUT})")
    options.add_run_options(p, runs=1)
    p.set_defaults(func=run)


def _topology(args: argparse.Namespace) -> str:
    from chaos.scorecard.plan import topology_name
    return topology_name(args.topology)      # read at the edge: chaos.cli._check_topology_options


def _writable(out: Path) -> None:
    """Refuse an --out that cannot take the pages, before anything starts (nothing left behind)."""
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".probe-{uuid.uuid4().hex[:8]}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise BadArguments(f"--out {out}: cannot write there ({exc.strerror or exc}); give a writable "
                           f"directory") from None
    finally:
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def _stop_after_interrupt() -> tuple[Callable[[Any], None], Callable[[], None]]:
    """Ctrl-C ends the scorecard after the cell it hit (exit 130), whatever that cell made of it.

    Inside a cell the interrupt may reach a client library first: psycopg turns it into a
    cancelled query, an ordinary error that grades the cell unknown, and the card would go on
    to the next fault. The flag set here stops it there. Returns the per-cell check and the
    handler's undo."""
    seen = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: Any) -> None:
        seen.set()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    def check(_cell: Any) -> None:
        if seen.is_set():
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    return check, lambda: signal.signal(signal.SIGINT, previous)


def run(args: argparse.Namespace) -> int:
    from chaos.scorecard.card import run_scorecard
    from chaos.scorecard.page import write_pages
    from chaos.scorecard.plan import plan
    from chaos.blackbox.config import load_config   # here, not with the parser: ~0.3 CPU s of imports
    from chaos.blackbox.session import preflight

    if args.runs < 1:
        raise BadArguments(f"--runs {args.runs}: give at least 1")
    config = load_config(args.worker_config)
    preflight(args.worker_cmd, config, [], args.runs)
    topology = _topology(args)
    cells = plan(args.faults, topology, config)
    out = Path(args.out)
    _writable(out)
    say = (lambda line: None) if args.json else (lambda line: print(line, file=sys.stderr, flush=True))

    def start() -> Any:
        """A topology of this card's own (at the start, and after a cell broke the rig)."""
        return failures.start_topology(args.backend, f"sc-{os.getpid()}-{uuid.uuid4().hex[:6]}",
                                       topology=args.topology, server=args.server)

    _root, run_root, cluster = options.start_in_run_dir(args, "scorecard", start)
    failures.crash_site.run_dir = run_root
    live = [cluster]
    stop_if_interrupted, undo = _stop_after_interrupt()

    def restart(broken: object) -> object:
        """A fresh topology after a cell broke the rig (the next cells run on it)."""
        live[0] = None
        broken.close()
        live[0] = start()
        return live[0]

    try:
        card = run_scorecard(cluster, args.worker_cmd, config, args.worker_config, cells, runs=args.runs,
                             seed=args.seed, time_scale=args.time_scale, topology=topology, run_root=run_root,
                             log=say, restart=restart,
                             on_cell=stop_if_interrupted)
    except BadArguments:
        shutil.rmtree(run_root, ignore_errors=True)   # refused before a worker started: nothing to keep
        raise
    finally:
        undo()
        if live[0] is not None:
            live[0].close()
        options.release_run_dir(run_root)
    code = card.exit_code()
    if code == 0:
        shutil.rmtree(run_root, ignore_errors=True)
    index = write_pages(card, out)
    data = card.to_json()
    if args.json:
        print(json.dumps(data, default=str))
    else:
        print(text_grid(data))
        print(f"page: {index}" + (f"\nrun dirs kept in {run_root}" if code else ""))
    return code


def text_grid(data: dict) -> str:
    """The grid for a terminal: one row per cell, one column per property."""
    props = list(data["cells"][0]["properties"]) if data["cells"] else []
    mark = {"pass": "ok", "fail": "FAIL", "unknown": "?"}
    width = max([len(c["fault"]) for c in data["cells"]] + [5])
    lines = [f"{'fault':<{width}}  " + "  ".join(f"{p:<{len(p)}}" for p in props)]
    for c in data["cells"]:
        lines.append(f"{c['fault']:<{width}}  " + "  ".join(f"{mark[c['properties'][p]]:<{len(p)}}" for p in props))
    for b in data["summary"]["broken_promises"]:
        lines.append(f"BROKEN {b}")
    return "\n".join(lines)
