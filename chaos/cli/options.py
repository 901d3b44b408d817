"""The run options, declared once: `run` (presets and the black-box mode) and `matrix` share
them with the same defaults, and the run dirs' root is found the same way for both."""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

RUNS_ROOT_ENV = "CHAOS_RUNS_DIR"
DEFAULT_RUNS = 10


def add_run_options(p: argparse.ArgumentParser) -> None:
    """--runs, --seed, --time-scale, --json, --backend, --server, --topology, --run-dir."""
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"runs per cell (default {DEFAULT_RUNS})")
    p.add_argument("--seed", type=int, default=0, help="run i uses seed + i (default 0)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply every duration (costs, TTLs, backoff, BLOCK, min-idle, faults); >= 0.1 advised")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--backend", default=None, help="cluster backend: native (default), compose, external")
    p.add_argument("--server", default=None, help="redis | valkey (default: $CHAOS_SERVER, else redis-server)")
    p.add_argument("--topology", default=None, help="replica (default) | sentinel[:sentinels=3,quorum=2,"
                   "min_replicas=0] (default: $CHAOS_TOPOLOGY); see docs/cluster.md")
    p.add_argument("--run-dir", default=None, help=f"where run dirs go (default ${RUNS_ROOT_ENV} or /tmp/chaos-runs)")


def runs_root(args: argparse.Namespace) -> Path:
    """Where run dirs go: --run-dir, else $CHAOS_RUNS_DIR, else <tmp>/chaos-runs (not created here)."""
    given = getattr(args, "run_dir", None) or os.environ.get(RUNS_ROOT_ENV)   # cluster/proxy commands have no --run-dir
    return Path(given or Path(tempfile.gettempdir()) / "chaos-runs")
