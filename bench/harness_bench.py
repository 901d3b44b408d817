"""Harness throughput: 20,000 no-work jobs drained by 1, 2 and 4 consumer processes, through
each consumer's own proxy and directly; prints one JSON object.

The stream is filled first (pipelined XADDs), then real consumer processes (the same code
the suites run: XREADGROUP COUNT n, a history line per step, XACK per entry) drain it.
events/s = jobs / (first delivery -> last ack, from the consumers' own histories); each cell
runs `--repeat` times and reports the median. CPU seconds by kind of process (consumers, the
Redis nodes, the proxy server, this bench's own polling) are counted over each drain and given
per event: on a shared machine they move much less with the load than the wall time does.
Targets (the seed lab's Node.js consumers, 20,000 jobs): 11,338/s with one consumer, 30,375/s
with four; through the proxy at least 0.5 of direct.

    python bench/harness_bench.py [--jobs 20000] [--count 100] [--consumers 1,2,4]
                                  [--modes direct,proxy] [--repeat 3] [--batch-acks]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
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
from chaos.workload.forkserver import close_fork_server, fork_server  # noqa: E402

REFERENCE_NODE_JOBS_PER_S = 11_338
REFERENCE_NODE_4_CONSUMERS_PER_S = 30_375
PROXIED_OVER_DIRECT_TARGET = 0.5
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system seconds of a live process (0.0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def fill(r, jobs: int) -> None:
    r.flushall()
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    pipe = r.pipeline(transaction=False)
    for n in range(1, jobs + 1):
        pipe.xadd(STREAM, Event(f"ej{n}-1", f"j{n}", "done", 1).fields())
        if n % 1000 == 0:
            pipe.execute()
    pipe.execute()


def server_pids(cluster) -> dict[str, list[int]]:
    """The Redis nodes' and the proxy server's pids (what the consumers' events cost besides them)."""
    out: dict[str, list[int]] = {"redis": [], "proxy": []}
    for component in cluster.components():
        if component.kind in out and component.pid:
            out[component.kind].append(component.pid)
    return out


def drain(cluster, mode: str, consumers: int, jobs: int, count: int, run_dir: Path, batch_acks: bool) -> dict:
    r = cluster.direct_redis()
    fill(r, jobs)
    run_dir.mkdir(parents=True)
    direct_url = f"redis://{cluster.primary}/0"
    servers = server_pids(cluster)
    before = {kind: sum(cpu_seconds(pid) for pid in pids) for kind, pids in servers.items()}
    bench_before = own_cpu_seconds()
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
    cpu = {"consumers": sum(cpu_seconds(c.pid) for c in children),
           **{kind: sum(cpu_seconds(pid) for pid in pids) - before[kind] for kind, pids in servers.items()},
           "bench": own_cpu_seconds() - bench_before}
    for child in children:
        child.kill(signal.SIGTERM)
    for child in children:
        child.wait(5)
    history = read_history(run_dir)
    first = min(op["time"] for op in history if op["f"] == "deliver")
    last = max(op["time"] for op in history if op["f"] == "ack")
    acked = sum(1 for op in history if op["f"] == "ack")
    if acked != jobs:
        raise SystemExit(f"{mode} x {consumers}: {acked} ack ops in the history for {jobs} jobs")
    return {"seconds": last - first, "events_per_s": acked / (last - first),
            "cpu_s": {kind: round(s, 3) for kind, s in cpu.items()}}


def cell(runs: list[dict], consumers: int, jobs: int) -> dict:
    """The median of a cell's runs, with every run's rate and the CPU per event by kind."""
    rates = [run["events_per_s"] for run in runs]
    kinds = runs[0]["cpu_s"]
    cpu_us = {kind: round(statistics.median(run["cpu_s"][kind] for run in runs) / jobs * 1e6, 1) for kind in kinds}
    cpu_us["total"] = round(sum(cpu_us.values()), 1)
    return {"consumers": consumers, "events_per_s": round(statistics.median(rates)),
            "runs_events_per_s": [round(rate) for rate in rates],
            "per_consumer_per_s": round(statistics.median(rates) / consumers),
            "cpu_us_per_event": cpu_us, "cpu_s_per_run": [run["cpu_s"] for run in runs]}


def target(figure: float | None, goal: float) -> dict:
    return {"target": goal, "median": figure, "met": figure is not None and figure >= goal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--count", type=int, default=100, help="COUNT per XREADGROUP")
    parser.add_argument("--consumers", default="1,2,4")
    parser.add_argument("--modes", default="direct,proxy", help="direct, proxy or both")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (the median is reported)")
    parser.add_argument("--batch-acks", action="store_true",
                        help="one XACK per read batch (ack policy batch=1) instead of one per entry")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    if not counts or any(n < 1 for n in counts) or set(modes) - {"direct", "proxy"} or not modes or args.repeat < 1:
        parser.error("--consumers takes positive counts (1,2,4), --modes direct and/or proxy, --repeat >= 1")
    out: dict = {"bench": "harness", "jobs": args.jobs, "count": args.count, "cpus": os.cpu_count(),
                 "repeat": args.repeat,
                 "acks": "one XACK per read batch" if args.batch_acks else "one XACK per entry",
                 "load_average_at_start": os.getloadavg()[0],
                 "reference_node_1_consumer_per_s": REFERENCE_NODE_JOBS_PER_S,
                 "reference_node_4_consumers_per_s": REFERENCE_NODE_4_CONSUMERS_PER_S}
    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    cluster = start_cluster("native", f"bench-{os.getpid()}")
    try:
        for mode in modes:
            out[mode] = {}
            for n in counts:
                runs = [drain(cluster, mode, n, args.jobs, args.count, tmp / f"{mode}-{n}-{k}", args.batch_acks)
                        for k in range(args.repeat)]
                out[mode][str(n)] = cell(runs, n, args.jobs)
    finally:
        close_fork_server()     # reaped now, not left to exit on EOF after this process
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    out["load_average_at_end"] = os.getloadavg()[0]
    for mode in modes:
        base = out[mode][str(counts[0])]["events_per_s"]
        out[mode]["speedup"] = {str(n): round(out[mode][str(n)]["events_per_s"] / base, 2) for n in counts}
    if set(modes) == {"direct", "proxy"}:
        out["proxied_over_direct"] = {str(n): round(out["proxy"][str(n)]["events_per_s"]
                                                    / out["direct"][str(n)]["events_per_s"], 3) for n in counts}

    def rate(mode: str, n: int) -> float | None:
        return out.get(mode, {}).get(str(n), {}).get("events_per_s")

    out["targets"] = {"direct_1_consumer": target(rate("direct", 1), REFERENCE_NODE_JOBS_PER_S),
                      "direct_4_consumers": target(rate("direct", 4), REFERENCE_NODE_4_CONSUMERS_PER_S)}
    if "proxied_over_direct" in out and "4" in out["proxied_over_direct"]:
        out["targets"]["proxied_over_direct_4_consumers"] = target(out["proxied_over_direct"]["4"],
                                                                   PROXIED_OVER_DIRECT_TARGET)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
