"""The run options, declared once: `run` (presets and the black-box mode) and `matrix` share
them with the same defaults, and the run dirs' root is found, and bounded, the same way for both."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from chaos.cluster.rundirs import OWNER_FILE, ClusterDir, Retention, retain_kept
from chaos.errors import BadArguments

RUNS_ROOT_ENV = "CHAOS_RUNS_DIR"
DEFAULT_RUNS = 10
# what the CLI itself writes in the runs root: "<cell>-<YYYYmmddTHHMMSS>-<pid>[-n]" dirs and
# "crash-<command>-<stamp>.txt" files; nothing else there is ever removed
RUN_DIR_NAMES = re.compile(r".+-\d{8}T\d{6}-\d+(-\d+)?|crash-.+-\d{8}T\d{6}-\d+\.txt")


def retention_help() -> str:
    """How the runs root is bounded, in words (for --help and the "kept in" message)."""
    d = Retention()
    return (f"the newest ${Retention.ENV['dirs']} entries (default {d.dirs}), at most ${Retention.ENV['max_mb']} MB "
            f"(default {d.max_mb:g}), none older than ${Retention.ENV['max_days']} days (default {d.max_days:g})")


def add_run_options(p: argparse.ArgumentParser, runs: int = DEFAULT_RUNS) -> None:
    """--runs (default `runs`), --seed, --time-scale, --json, --backend, --server, --topology, --run-dir."""
    p.add_argument("--runs", type=int, default=runs, help=f"runs per cell (default {runs})")
    p.add_argument("--seed", type=int, default=0, help="run i uses seed + i (default 0)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply every duration (costs, TTLs, backoff, BLOCK, min-idle, faults); >= 0.1 advised")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--backend", default=None, help="cluster backend: native (default), compose, external")
    p.add_argument("--server", default=None, help="redis | valkey (default: $CHAOS_SERVER, else redis-server)")
    p.add_argument("--topology", default=None, help="replica (default) | sentinel[:sentinels=3,quorum=2,"
                   "min_replicas=0] (default: $CHAOS_TOPOLOGY); see docs/cluster.md")
    p.add_argument("--run-dir", default=None,
                   help=f"where the run dirs of a mismatching or unknown cell are kept (default ${RUNS_ROOT_ENV}, "
                        f"else {Path(tempfile.gettempdir()) / 'chaos-runs'}); a matching cell keeps none. "
                        f"Bounded after every cell: {retention_help()}; a command never removes a dir it names")


def runs_root(args: argparse.Namespace) -> Path:
    """Where run dirs go: --run-dir, else $CHAOS_RUNS_DIR, else <tmp>/chaos-runs (not created here)."""
    given = getattr(args, "run_dir", None) or os.environ.get(RUNS_ROOT_ENV)   # cluster/proxy commands have no --run-dir
    return Path(given or Path(tempfile.gettempdir()) / "chaos-runs")


def new_run_dir(root: Path, name: str) -> Path:
    """A fresh ``<root>/<name>-<stamp>-<pid>[-n]`` owned by this process while it runs (so no
    other command's retention removes it); `release_run_dir` when the cell is over."""
    base = f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    path, n = root / base, 1
    while path.exists():            # two cells of one label within a second (matrix)
        n += 1
        path = root / f"{base}-{n}"
    ClusterDir(path)
    return path


def start_in_run_dir(args: argparse.Namespace, label: str,
                     start: Callable[[], Any]) -> tuple[Path, Path, Any]:
    """Make a run dir ``<runs root>/<label>-...`` and start a topology with ``start()``:
    (runs root, run dir, cluster). A bad CHAOS_KEPT_* or a runs root that cannot be written is
    bad input, refused before anything starts; a start that fails removes the run dir (nothing ran)."""
    Retention.from_env()
    root = runs_root(args)
    try:
        root.mkdir(parents=True, exist_ok=True)
        run_dir = new_run_dir(root, label)
    except OSError as exc:
        raise BadArguments(f"run dirs cannot go to {root} ({exc.strerror or exc}): give a writable dir "
                           "with --run-dir or $CHAOS_RUNS_DIR") from None
    try:
        cluster = start()
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return root, run_dir, cluster


def release_run_dir(path: Path) -> None:
    """The cell is over: the dir becomes subject to retention like any other kept dir."""
    (path / OWNER_FILE).unlink(missing_ok=True)


def bound_runs_root(root: Path, spare: Iterable[Path] = ()) -> list[Path]:
    """Apply the kept-dirs retention (CHAOS_KEPT_*) to the CLI's runs root; `spare`: the dirs
    this command has named (never removed). Returns what was removed."""
    return retain_kept(root, spare=spare, names=RUN_DIR_NAMES)
