"""`python -m chaos run --worker-cmd "..." --worker-config FILE [--fault F]... [--runs N]`.

The black-box mode of the run command: chaos/cli/run_cmd.py adds these two options with
``add_arguments`` and hands over with ``run_from_args`` when ``wants_blackbox(args)``,
so both modes share one set of run options (--fault, --runs, --seed, --time-scale, ...)
with the same defaults. Output and exit codes are the run command's contract: one JSON object with ``--json`` (progress on stderr),
0 = matches the declared ``[expect]`` (or none declared), 1 = mismatch, 2 = unknown.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.cli import failures, options
from chaos.replay import blackbox_command
from chaos.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, BadArguments

if TYPE_CHECKING:
    from chaos.blackbox.session import BlackBoxRuns

# chaos.blackbox (the orchestrator, redis, psycopg: ~0.3 CPU s) is imported where a black-box run
# starts, not with the parser: `python -m chaos list|describe|cluster|--help` never needs it.
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
    given = args.fault or []
    return [given] if isinstance(given, str) else list(given)


def _where(args: argparse.Namespace) -> dict[str, str | None]:
    """The topology and server the edge read into ``args`` (a caller's own Namespace may name neither)."""
    return {"topology": getattr(args, "topology", None), "server": getattr(args, "server", None)}


def reproduce(args: argparse.Namespace, faults: list[str], seed: int) -> str:
    return blackbox_command(args.worker_cmd, args.worker_config, faults, args.runs, seed, args.time_scale,
                            args.backend, **_where(args))


def to_json(cell: BlackBoxRuns, *, args: argparse.Namespace, seed: int, wall_s: float, run_dir: Any) -> dict:
    """The run command's JSON object, plus a ``blackbox`` section with the extra figures."""
    from chaos.blackbox import expect
    exp = expect.expectation(cell.config.expect, cell.extra)
    faults = cell.fault_texts or ["none"]
    out = cell.cell.to_json(preset=PRESET_LABEL, fault="+".join(faults), seed=seed,
                            time_scale=args.time_scale, expected=exp, wall_s=round(wall_s, 3), run_dir=run_dir,
                            reproduce=reproduce(args, cell.fault_texts, seed))
    out.update(cell.extra.as_dict())
    out["stalled_after_heal_s"] = cell.stalled_after_heal_s
    out["blackbox"] = {"worker_cmd": args.worker_cmd, "worker_config": args.worker_config,
                       "processes": cell.config.worker.processes, "encoder": cell.config.encoder.format,
                       "observed": "triggers on " + ", ".join(cell.config.tables())}
    for per_run, run in zip(out["per_run"], cell.runs):
        per_run.update(run.extra.as_dict())
        per_run.update(run.liveness.as_dict())
    return out


def exit_code(data: dict) -> int:
    if data["verdict"] == "unknown":
        return EXIT_UNKNOWN
    return EXIT_OK if data["matches_expectation"] else EXIT_MISMATCH


def run_from_args(args: argparse.Namespace) -> int:
    """Start a topology, run the cell, print, return the exit code."""
    from chaos.blackbox.config import load_config
    from chaos.blackbox.session import preflight, run_blackbox
    config = load_config(args.worker_config)  # bad input: exit 254 before anything starts
    _, faults = preflight(args.worker_cmd, config, _faults(args), args.runs)   # the edge: parsed once
    seed = args.seed
    quiet = args.json and not args.trace
    say = (lambda line: None) if quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    t0 = time.monotonic()
    root, run_root, cluster = options.start_in_run_dir(
        args, "blackbox",
        lambda: failures.start_topology(args.backend, f"bb-{os.getpid()}-{uuid.uuid4().hex[:6]}", **_where(args)))
    failures.crash_site.run_dir = run_root
    data: dict | None = None
    try:
        cell = run_blackbox(cluster, args.worker_cmd, config, faults=faults, runs=args.runs, seed=seed,
                            time_scale=args.time_scale, run_root=run_root, log=say, reset=False,
                            trace=(lambda line: print(line, file=sys.stderr)) if args.trace else None)
        data = to_json(cell, args=args, seed=seed, wall_s=time.monotonic() - t0, run_dir=run_root)
    except BadArguments:
        shutil.rmtree(run_root, ignore_errors=True)  # nothing ran: nothing to keep
        raise
    finally:
        cluster.close()
        options.release_run_dir(run_root)
        if data is not None and data["verdict"] == "valid" and data["matches_expectation"]:
            shutil.rmtree(run_root, ignore_errors=True)  # kept only when there is something to look at
            data["run_dir"] = None
    if data is not None:
        options.bound_runs_root(root, spare=[run_root])
    if args.json:
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
    stopped = data["anomaly_counts"].get("stopped-consuming", 0)
    if stopped:
        lines.append(f"  STOPPED CONSUMING: {stopped} published events a live consumer never consumed after the "
                     f"faults healed (no progress for {data['stalled_after_heal_s']} s after the last heal)")
    lines += [f"  MISMATCH {m}" for m in data["mismatches"]]
    lines += [f"  unknown: {r.splitlines()[0].removesuffix('; log tail:')}" for r in data["unknown_reasons"]]
    lines.append(f"  reproduce: {data['reproduce']}")
    if data.get("run_dir"):
        lines.append(f"  run dirs kept in {data['run_dir']} ({Path(data['run_dir']).parent} keeps "
                     f"{options.retention_help()})")
    return "\n".join(lines)
