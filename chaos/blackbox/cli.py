"""`python -m chaos run --worker-cmd "..." --worker-config FILE [--fault F]... [--runs N]`.

The run command (chaos/cli/run_cmd.py) adds these options with ``add_arguments`` and
hands over with ``run_from_args`` when ``wants_blackbox(args)``. Output and exit codes
are the run command's contract: one JSON object with ``--json`` (progress on stderr),
0 = matches the declared ``[expect]`` (or none declared), 1 = mismatch, 2 = unknown.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from chaos.blackbox import expect
from chaos.blackbox.config import load_config
from chaos.blackbox.session import BlackBoxCell, preflight, run_blackbox
from chaos.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, BadArguments

PRESET_LABEL = "blackbox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The two options of the black-box mode (the run command owns --fault, --runs, ...)."""
    group = parser.add_argument_group("black-box worker (docs/blackbox.md)")
    group.add_argument("--worker-cmd", metavar="CMD",
                       help="your consumer's command line, started as N processes with CHAOS_* endpoints")
    group.add_argument("--worker-config", metavar="FILE",
                       help="TOML naming the state table, key/version columns, side-effect table, encoder")


def wants_blackbox(args: argparse.Namespace) -> bool:
    """Whether the run is a black-box run; half of the pair is bad input."""
    cmd, cfg = getattr(args, "worker_cmd", None), getattr(args, "worker_config", None)
    if bool(cmd) != bool(cfg):
        missing = "--worker-config FILE" if cmd else "--worker-cmd \"...\""
        raise BadArguments(f"a black-box run needs both --worker-cmd and --worker-config; add {missing}")
    if cmd and getattr(args, "preset", None):
        raise BadArguments("--preset runs a built-in strategy and --worker-cmd your own consumer; give one")
    return bool(cmd)


def _faults(args: argparse.Namespace) -> list[str]:
    given = getattr(args, "fault", None) or []
    return [given] if isinstance(given, str) else list(given)


def reproduce(args: argparse.Namespace, faults: list[str], seed: int) -> str:
    parts = ["python -m chaos run", f"--worker-cmd {shlex.quote(args.worker_cmd)}",
             f"--worker-config {shlex.quote(args.worker_config)}"]
    parts += [f"--fault {shlex.quote(f)}" for f in faults]
    parts += [f"--runs {getattr(args, 'runs', 1) or 1}", f"--seed {seed}",
              f"--time-scale {getattr(args, 'time_scale', 1.0) or 1.0:g}"]
    return " ".join(parts)


def to_json(cell: BlackBoxCell, *, args: argparse.Namespace, seed: int, wall_s: float, run_dir: Any) -> dict:
    """The run command's JSON object, plus a ``blackbox`` section with the extra figures."""
    exp = expect.expectation(cell.config.expect, cell.extra)
    faults = cell.faults or ["none"]
    out = cell.cell.to_json(preset=PRESET_LABEL, fault="+".join(faults), seed=seed,
                            time_scale=getattr(args, "time_scale", 1.0) or 1.0, expected=exp,
                            wall_s=round(wall_s, 3), run_dir=run_dir, reproduce=reproduce(args, cell.faults, seed))
    out.update(cell.extra.as_dict())
    out["blackbox"] = {"worker_cmd": args.worker_cmd, "worker_config": args.worker_config,
                       "processes": cell.config.worker.processes, "encoder": cell.config.encoder.format,
                       "observed": "triggers on " + ", ".join(cell.config.tables())}
    for per_run, run in zip(out["per_run"], cell.runs):
        per_run.update(run.extra.as_dict())
    return out


def exit_code(data: dict) -> int:
    if data["verdict"] == "unknown":
        return EXIT_UNKNOWN
    return EXIT_OK if data["matches_expectation"] else EXIT_MISMATCH


def runs_root(args: argparse.Namespace) -> Path:
    """Where run dirs go: --run-dir, else $CHAOS_RUNS_DIR, else <tmp>/chaos-runs (as for presets)."""
    return Path(getattr(args, "run_dir", None) or os.environ.get("CHAOS_RUNS_DIR")
                or Path(tempfile.gettempdir()) / "chaos-runs")


def run_from_args(args: argparse.Namespace) -> int:
    """Start a topology, run the cell, print, return the exit code."""
    from chaos.cluster import start_cluster

    config = load_config(args.worker_config)  # bad input: exit 254 before anything starts
    faults = _faults(args)
    preflight(args.worker_cmd, config, faults, int(getattr(args, "runs", 1) or 1))
    seed = getattr(args, "seed", None)
    seed = int(seed) if seed is not None else int(time.time()) % 100000
    quiet = getattr(args, "json", False) and not getattr(args, "trace", False)
    say = (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    t0 = time.monotonic()
    run_root = runs_root(args) / f"blackbox-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    run_root.mkdir(parents=True)
    cluster = start_cluster(getattr(args, "backend", None), f"bb-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    data: dict | None = None
    try:
        cell = run_blackbox(cluster, args.worker_cmd, config, faults=faults, runs=int(getattr(args, "runs", 1) or 1),
                            seed=seed, time_scale=float(getattr(args, "time_scale", 1.0) or 1.0),
                            run_root=run_root, log=say, reset=False,
                            trace=(lambda line: print(line, file=sys.stderr)) if getattr(args, "trace", False) else None)
        data = to_json(cell, args=args, seed=seed, wall_s=time.monotonic() - t0, run_dir=run_root)
    except BadArguments:
        shutil.rmtree(run_root, ignore_errors=True)  # nothing ran: nothing to keep
        raise
    finally:
        cluster.close()
        if data is not None and data["verdict"] == "valid" and data["matches_expectation"]:
            shutil.rmtree(run_root, ignore_errors=True)  # kept only when there is something to look at
            data["run_dir"] = None
    if getattr(args, "json", False):
        print(json.dumps(data, default=str))
    else:
        print(summary(data))
    return exit_code(data)


def summary(data: dict) -> str:
    """The human answer: verdict, the figures, the mismatches."""
    keys = ("published", "lost", "duplicated", "reordered", "wrong_final_state_runs", "wrong_keys", "pending_left",
            "undelivered", "duplicated_side_effects", "missing_side_effects", "superseded_unobserved")
    lines = [f"{data['blackbox']['worker_cmd']} under {data['fault']} x {data['runs']} runs: {data['verdict']}",
             "  " + "  ".join(f"{k}={data[k]}" for k in keys)]
    lines += [f"  MISMATCH {m}" for m in data["mismatches"]]
    lines += [f"  unknown: {r.splitlines()[0]}" for r in data["unknown_reasons"]]
    lines.append(f"  reproduce: {data['reproduce']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m chaos.blackbox.cli ...`: the same run without the run command (same options)."""
    from chaos.cli import _Parser
    from chaos.errors import EXIT_BAD_ARGS

    parser = _Parser(prog="python -m chaos.blackbox.cli", description="run your consumer under faults")
    add_arguments(parser)
    parser.add_argument("--fault", action="append", default=[], help="fault[:k=v,...]; may be repeated")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--backend", default=None)
    parser.add_argument("--run-dir", default=None)
    args = parser.parse_args(argv)
    try:
        if not wants_blackbox(args):
            raise BadArguments("give --worker-cmd \"...\" and --worker-config FILE")
        return run_from_args(args)
    except BadArguments as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS


if __name__ == "__main__":
    sys.exit(main())
