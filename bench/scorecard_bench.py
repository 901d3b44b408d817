"""The whole scorecard catalogue for one consumer at the default size; prints JSON.

Runs ``python -m chaos scorecard --faults all --runs 1`` (the defaults: every registered
fault that fits the topology, one seeded run each, the example's 200-event burst) as a
user would, and reports the wall time against the 10-minute target, each cell's time,
the grid, and the machine's load average before and after (the machine is shared: say
the load with the figure).

    python bench/scorecard_bench.py [--consumer cas|ack-first|taskiq|faststream] [--topology replica|sentinel]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 600
CONSUMERS = {
    "cas": ("python -m examples.redis_py_cas", "examples/redis_py_cas.toml"),
    "ack-first": ("python -m examples.redis_py_ack_first", "examples/redis_py_ack_first.toml"),
    "taskiq": ("taskiq worker examples.taskiq_orders:broker --workers 1 --max-async-tasks 10",
               "examples/taskiq_orders.toml"),
    "faststream": ("python -m examples.faststream_orders", "examples/faststream_orders.toml"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--consumer", choices=sorted(CONSUMERS), default="cas")
    p.add_argument("--topology", default="replica")
    p.add_argument("--faults", default="all")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--out", default=None, help="where the pages go (default: a temporary dir, removed)")
    args = p.parse_args()
    command, config = CONSUMERS[args.consumer]
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="scorecard-bench-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    load_before = os.getloadavg()
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "chaos", "scorecard", "--worker-cmd", command,
                           "--worker-config", config, "--faults", args.faults, "--runs", str(args.runs),
                           "--topology", args.topology, "--out", str(out), "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    load_after = os.getloadavg()
    try:
        card = json.loads(done.stdout)
    except ValueError:
        print(json.dumps({"error": f"scorecard exited {done.returncode}", "stderr": done.stderr[-2000:]}))
        sys.exit(1)
    print(json.dumps({
        "consumer": args.consumer, "worker_cmd": command, "topology": args.topology, "runs": args.runs,
        "cells": len(card["cells"]), "skipped": [s["fault"] for s in card["skipped"]],
        "wall_s": round(wall, 1), "target_s": TARGET_S, "within_target": wall <= TARGET_S,
        "cell_wall_s": {c["fault"]: c["wall_s"] for c in card["cells"]},
        "grid": {c["fault"]: c["properties"] for c in card["cells"]},
        "exit_code": done.returncode, "cpus": os.cpu_count(),
        "load_before": [round(x, 1) for x in load_before], "load_after": [round(x, 1) for x in load_after],
        "out": str(out) if args.out else None,
    }, indent=1))
    if not args.out:
        import shutil
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
