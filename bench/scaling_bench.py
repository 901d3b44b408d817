"""Scaling: S2 (4 shards, a consumer each) and S3 (one reader fanning out to 4 worker
processes) against S1 (one consumer), side by side; prints one JSON object.

The three cells run the suite's ordering workload (many-orders: 200 orders x 3 events, 5 ms of
work each) on one cluster, interleaved round by round (S1, S2, S3, S1, ...), so a burst of
someone else's load on the shared machine hits all three alike. events/s per run is the
checker's (handled events / first publish -> last effect); each preset's figure is the median
of `--repeat` runs, and each round also gives its own ratios (the three cells of one round ran
seconds apart). Target (the strategies' point): S2 and S3 with 4 consumers at least 1.5x S1
(4 consumers of 5 ms jobs could do 4x; the rest is the reader, the producer and the links),
and at most 8x (more than 4 consumers can give is a broken measurement).

suites/ordering/test_sharding_fanout.py keeps the clock-free side: the 4 consumers each apply a
share and work at once (their applies overlap), which a loaded machine does not change.

    python bench/scaling_bench.py [--repeat 3] [--presets s1,s2,s3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import chaos.strategies  # noqa: E402,F401 - parts load in dependency order
from chaos.cluster import start_cluster  # noqa: E402
from chaos.run import run_cell  # noqa: E402

WORKLOAD = {"workload": "many-orders"}     # 200 orders x 3 events, 5 ms each (the suite's)
RATIO_LOW, RATIO_HIGH = 1.5, 8.0
BASE = "s1"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def one_run(cluster: Any, preset: str, seed: int) -> dict[str, Any]:
    started = time.monotonic()
    result = run_cell(cluster, preset, [], runs=1, seed=seed, parts=WORKLOAD, keep_runs="never")
    metrics = result.metrics[0]
    return {"events_per_s": round(metrics.throughput or 0, 1), "work_s": round(metrics.work_s or 0, 3),
            "wall_s": round(time.monotonic() - started, 2),
            "verdict": result.verdict, "published": result.counts.published,
            "wrong_final_state_runs": result.counts.wrong_final_state_runs, "reordered": result.counts.reordered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each runs every preset once)")
    parser.add_argument("--presets", default="s1,s2,s3", help=f"comma-separated; {BASE} is the base of the ratios")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    presets = [p for p in args.presets.split(",") if p]
    if BASE not in presets:
        raise SystemExit(f"--presets must include {BASE}: the ratios are against it")
    out: dict[str, Any] = {"bench": "scaling", "workload": WORKLOAD["workload"], "repeat": args.repeat,
                           "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                           "load_before": load()}
    rounds: list[dict[str, dict[str, Any]]] = []
    cluster = start_cluster("native", f"scalingbench-{os.getpid()}")
    try:
        for n in range(args.repeat):
            rounds.append({preset: one_run(cluster, preset, args.seed + n) for preset in presets})
    finally:
        cluster.close()
        if "chaos.workload.forkserver" in sys.modules:   # started by the first run: reaped now
            sys.modules["chaos.workload.forkserver"].close_fork_server()
    median = {p: statistics.median(r[p]["events_per_s"] for r in rounds) for p in presets}
    out["events_per_s_median"] = median
    out["ratio_vs_s1"] = {p: round(median[p] / median[BASE], 2) if median[BASE] else None
                          for p in presets if p != BASE}
    out["ratio_vs_s1_by_round"] = [{p: round(r[p]["events_per_s"] / r[BASE]["events_per_s"], 2)
                                    if r[BASE]["events_per_s"] else None for p in presets if p != BASE}
                                   for r in rounds]
    out["rounds"] = rounds
    out["targets"] = {f"{p}_over_s1_in_[{RATIO_LOW},{RATIO_HIGH}]": {
        "measured": ratio, "met": ratio is not None and RATIO_LOW <= ratio <= RATIO_HIGH}
        for p, ratio in out["ratio_vs_s1"].items()}
    out["all_valid"] = all(r[p]["verdict"] == "valid" for r in rounds for p in presets)
    out["load_after"] = load()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
