"""What `WAIT` and `min-replicas-to-write` buy under a Sentinel failover; prints one JSON object.

    python bench/sentinel_durability.py [--runs 3] [--holds 500,2000] [--publishes 2000]

Three producers on the sentinel topology, each the retrying producer with 4 retries (so a
refused publish is retried for 0.5+1+2+4 s, not dropped at once):

* ``neither``: plain XADD;
* ``wait``: XADD then ``WAIT 1 25`` (a publish WAIT does not confirm is `info`: applied on
  the primary, not confirmed; the producer does not retry it);
* ``min_replicas``: nodes run ``min-replicas-to-write 1``, ``min-replicas-max-lag 1``; the
  primary refuses XADD with NOREPLICAS once the replica's acks are over a second old, and
  the producer retries.

Each runs 250 events over 4 s (consumers slower than the producer) under ``sentinel-failover:mode=kill,hold_ms=H`` (replication held both ways for
H ms, the primary killed, Sentinel promotes) for each hold. Per config and hold, summed
over the runs: ``acked`` (publishes the producer was told succeeded, WAIT-confirmed for
``wait``), ``acked_lost`` (of those, never handled: the loss the guard cannot see),
``unconfirmed`` / ``unconfirmed_lost`` (WAIT said 0), ``refused`` (NOREPLICAS answers),
``dropped`` (events whose every attempt failed), ``lost`` (the checker's). ``throughput``:
single publishes per second through Sentinel and the proxy with no fault, and the p50/p99
publish latency in ms: the cost of each guarantee.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.cluster import start_cluster  # noqa: E402
from chaos.cluster.sentinel import SentinelSpec, SentinelCluster  # noqa: E402
from chaos.cluster.sentinel_client import redis_client  # noqa: E402
from chaos.history import read_history  # noqa: E402
from chaos.run import run_cell  # noqa: E402

PRODUCER = "s1:retries=4"
# The failover area's workload stretched to 4 s of publishing (gap 16 ms), so the producer is
# still publishing when min-replicas-max-lag (1 s) has run out during a 2 s hold.
WORKLOAD = "many-orders:keys=50,events=5,gap_ms=16,cost_ms=40"
CONFIGS = {
    "neither": (PRODUCER, SentinelSpec()),
    "wait": (f"{PRODUCER},wait_replicas=1,wait_ms=25", SentinelSpec()),
    "min_replicas": (PRODUCER, SentinelSpec(min_replicas=1, min_replicas_max_lag=1)),
}


def publish_outcomes(histories: list[list[dict]]) -> dict[str, int]:
    """Acknowledged / unconfirmed / refused publishes and which of them were never handled."""
    out = dict(acked=0, acked_lost=0, unconfirmed=0, unconfirmed_lost=0, refused=0)
    for history in histories:
        handled = {op.get("event_id") for op in history if op["f"] == "apply" and op["type"] == "ok"
                   and op.get("effect", "applied") in ("applied", "stale")}
        acked, unconfirmed = set(), set()
        for op in history:
            if op["f"] != "publish" or op["process"].startswith("C"):
                continue
            error = str((op.get("value") or {}).get("error", ""))
            if op["type"] == "ok":
                acked.add(op["event_id"])
            elif op["type"] == "info" and error.startswith("WAIT"):
                unconfirmed.add(op["event_id"])
            elif op["type"] == "fail" and "NOREPLICAS" in error:
                out["refused"] += 1
        unconfirmed -= acked
        out["acked"] += len(acked)
        out["acked_lost"] += len(acked - handled)
        out["unconfirmed"] += len(unconfirmed)
        out["unconfirmed_lost"] += len(unconfirmed - handled)
    return out


def failover_figures(cluster: SentinelCluster, preset: str, hold_ms: int, runs: int, seed: int) -> dict:
    fault = f"sentinel-failover:mode=kill,hold_ms={hold_ms},after_entries=100,at_ms=0"
    cluster.reset()
    result = run_cell(cluster, preset, [fault], runs=runs, seed=seed, parts={"workload": WORKLOAD},
                      keep_runs="always", raise_fault_errors=False)
    try:
        histories = [read_history(Path(d), run=i) for i, d in enumerate(result.run_dirs)]
        counts = result.counts
        stops = [op["value"] for h in histories for op in h
                 if op["f"] == "fault" and op["value"].get("phase") == "stop"]
        return {"fault": fault, "runs": runs, "verdict": result.verdict, "failed_over": len(stops),
                **publish_outcomes(histories), "dropped": counts.dropped, "lost": counts.lost,
                "undelivered": counts.undelivered, "pending_left": counts.pending_left,
                "unknown_reasons": [r[:300] for r in result.unknown_reasons][:3],
                "published": counts.published, "redelivered": counts.redelivered,
                "promote_s": [s.get("promote_s") for s in stops], "fault_errors": result.fault_errors,
                "wall_s": round(result.wall_s, 2)}
    finally:
        shutil.rmtree(result.run_root, ignore_errors=True)


def throughput(cluster: SentinelCluster, wait: bool, publishes: int) -> dict:
    cluster.reset()
    client = redis_client(redis_url="", sentinels=cluster.sentinel_addresses(), master_name=cluster.master_name,
                          decode_responses=True, protocol=2, socket_timeout=5)
    try:
        client.ping()
        latencies = []
        started = time.perf_counter()
        for i in range(publishes):
            t = time.perf_counter()
            client.xadd("bench", {"i": i})
            if wait:
                client.execute_command("WAIT", 1, 25)
            latencies.append((time.perf_counter() - t) * 1000)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    latencies.sort()
    return {"publishes_per_s": round(publishes / elapsed), "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--holds", default="500,2000", help="replication holds in ms, comma-separated")
    parser.add_argument("--publishes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5, help="throughput rounds, configs interleaved (median kept)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default="", help="configs to run, comma-separated (default: all)")
    args = parser.parse_args()
    holds = [int(h) for h in args.holds.split(",")]
    chosen = {n: c for n, c in CONFIGS.items() if not args.only or n in args.only.split(",")}
    out: dict = {"workload": WORKLOAD, "producer": PRODUCER, "holds_ms": holds, "configs": {}}
    clusters: dict[SentinelSpec, SentinelCluster] = {}
    try:
        for preset, spec in chosen.values():
            if spec not in clusters:
                clusters[spec] = start_cluster(None, f"bench-sentinel-{os.getpid()}-{len(clusters)}",
                                               topology=spec.text())
        # A shared 2-core box swings single-publish rates 4x between rounds: interleave, keep the median.
        rounds: dict[str, list[dict]] = {name: [] for name in chosen}
        for _ in range(args.rounds):
            for name, (preset, spec) in chosen.items():
                rounds[name].append(throughput(clusters[spec], name == "wait", args.publishes))
        for name, (preset, spec) in chosen.items():
            rates = sorted(r["publishes_per_s"] for r in rounds[name])
            out["configs"][name] = {
                "preset": preset, "topology": spec.text(),
                "throughput": {"publishes_per_s_median": statistics.median(rates), "publishes_per_s_rounds": rates,
                               "p50_ms_median": statistics.median(r["p50_ms"] for r in rounds[name])},
                "failover": {str(h): failover_figures(clusters[spec], preset, h, args.runs, args.seed)
                             for h in holds}}
            print(f"{name} done", file=sys.stderr, flush=True)
    finally:
        for cluster in clusters.values():
            cluster.close()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
