"""Mutation score and time: every mutant of chaos/mutants/ against the rows of the part it
breaks (chaos/mutants/runner.py), on a fresh cluster; prints one JSON object.

Target: every mutant killed (score 1.0) in under 10 minutes on this machine (2 cores). The
JSON is the command's (`python -m chaos mutants --json`) plus the machine's load average
before and after, since a shared machine's load moves the wall time.

    python bench/mutants_bench.py [--runs 1] [--max-cells 4] [--seed 0] [--only a,b]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.cluster import start_cluster  # noqa: E402
from chaos.mutants.runner import run_all  # noqa: E402
from chaos.workload.forkserver import close_fork_server  # noqa: E402

TARGET_S = 600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--max-cells", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or None
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    try:
        with start_cluster(None, f"mutants-bench-{os.getpid()}") as cluster:
            report = run_all(cluster, names, seed=args.seed, runs=args.runs, max_cells=args.max_cells)
    finally:
        close_fork_server()
    wall = time.monotonic() - started
    report.update({"bench_wall_s": round(wall, 1), "target_s": TARGET_S, "under_target": wall < TARGET_S,
                   "load_before": round(load_before, 1), "load_after": round(os.getloadavg()[0], 1),
                   "cpus": os.cpu_count()})
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
