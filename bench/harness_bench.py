"""Harness throughput: 20,000 no-work jobs drained by 1, 2 and 4 consumer processes, through
each consumer's own proxy and directly; prints one JSON object.

The stream is filled first (pipelined XADDs), then real consumer processes (the same code
the suites run: XREADGROUP COUNT n, a history line per step, XACK per entry) drain it.
events/s = jobs / (first delivery -> last ack, from the consumers' own histories).
The reference lab's single Node.js consumer did 11,338 jobs/s.

    python bench/harness_bench.py [--jobs 20000] [--count 100] [--consumers 1,2,4] [--batch-acks]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.cluster import start_cluster  # noqa: E402
from chaos.history import read_history  # noqa: E402
from chaos.strategies.ack import AckPolicy  # noqa: E402
from chaos.strategies.delivery.base import GROUP, STREAM  # noqa: E402
from chaos.strategies.guards import GUARDS  # noqa: E402
from chaos.events import Event  # noqa: E402
from chaos.workload.final_state import fully_acked  # noqa: E402
from chaos.workload.forkserver import fork_server  # noqa: E402

REFERENCE_NODE_JOBS_PER_S = 11_338


def fill(r, jobs: int) -> None:
    r.flushall()
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    pipe = r.pipeline(transaction=False)
    for n in range(1, jobs + 1):
        pipe.xadd(STREAM, Event(f"ej{n}-1", f"j{n}", "done", 1).fields())
        if n % 1000 == 0:
            pipe.execute()
    pipe.execute()


def drain(cluster, mode: str, consumers: int, jobs: int, count: int, run_dir: Path, batch_acks: bool) -> dict:
    r = cluster.direct_redis()
    fill(r, jobs)
    run_dir.mkdir(parents=True)
    direct_url = f"redis://{cluster.primary}/0"
    children = []
    started = time.monotonic()
    for i in range(1, consumers + 1):
        name = f"C{i}"
        links = cluster.worker_links(name)
        spec = {"role": "consumer", "name": name, "consumer": name, "streams": [STREAM], "group": GROUP,
                "count": count, "block_ms": 50, "claim_idle_ms": 60_000, "claim": "never",
                "guard": GUARDS["noop"]().to_spec(), "ack": AckPolicy(batch=batch_acks).to_spec(),
                "run_dir": str(run_dir), "redis_url": links.redis_url if mode == "proxy" else direct_url,
                "pg_dsn": links.pg_dsn, "time_scale": 1.0, "seed": 0, "t0": started}
        children.append(fork_server().spawn(spec, run_dir / f"{name}.log"))
    deadline = started + 300
    while not fully_acked(r, [STREAM], GROUP):
        dead = [c for c in children if not c.alive()]
        if dead or time.monotonic() > deadline:
            logs = "".join((run_dir / f"C{i}.log").read_text() for i in range(1, consumers + 1))
            raise SystemExit(f"{mode} x {consumers}: not drained ({len(dead)} consumers died)\n{logs[-2000:]}")
        time.sleep(0.005)
    for child in children:
        child.kill(signal.SIGTERM)
    for child in children:
        child.wait(5)
    history = read_history(run_dir)
    first = min(op["time"] for op in history if op["f"] == "deliver")
    last = max(op["time"] for op in history if op["f"] == "ack")
    acked = sum(1 for op in history if op["f"] == "ack")
    return {"consumers": consumers, "acked": acked, "seconds": round(last - first, 4),
            "events_per_s": round(acked / (last - first)), "per_consumer_per_s": round(acked / (last - first) / consumers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--count", type=int, default=100, help="COUNT per XREADGROUP")
    parser.add_argument("--consumers", default="1,2,4")
    parser.add_argument("--batch-acks", action="store_true",
                        help="one XACK per read batch (ack policy batch=1) instead of one per entry")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    out: dict = {"bench": "harness", "jobs": args.jobs, "count": args.count, "cpus": os.cpu_count(),
                 "acks": "one XACK per read batch" if args.batch_acks else "one XACK per entry",
                 "load_average_at_start": os.getloadavg()[0],
                 "reference_node_1_consumer_per_s": REFERENCE_NODE_JOBS_PER_S, "direct": {}, "proxy": {}}
    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    cluster = start_cluster("native", f"bench-{os.getpid()}")
    try:
        for mode in ("direct", "proxy"):
            for n in counts:
                out[mode][str(n)] = drain(cluster, mode, n, args.jobs, args.count, tmp / f"{mode}-{n}",
                                          args.batch_acks)
    finally:
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for mode in ("direct", "proxy"):
        base = out[mode][str(counts[0])]["events_per_s"]
        out[mode]["speedup"] = {str(n): round(out[mode][str(n)]["events_per_s"] / base, 2) for n in counts}
    out["proxy_cost"] = {str(n): round(1 - out["proxy"][str(n)]["events_per_s"] / out["direct"][str(n)]["events_per_s"], 3)
                         for n in counts}
    out["beats_reference_per_consumer_direct"] = out["direct"][str(counts[0])]["events_per_s"] > REFERENCE_NODE_JOBS_PER_S
    print(json.dumps(out))


if __name__ == "__main__":
    main()
