"""Checker speed on synthetic histories: 10^5, 10^6 and 2x10^6 ops; prints one JSON object.

Target (issue 5): 10^6 ops checked in under 5 s, and the 2x10^6 / 10^6 time ratio at most
2.3 (linear growth); both judged on CPU time, which neighbours on a shared machine cannot
inflate the way they inflate wall time (check_run is single-threaded and does no I/O, so
on a quiet machine the two are equal). `check_s` is check_run alone on ops in memory; `read_s` is
read_history on the same ops written as JSON-lines files (one per process), so
`read_s + check_s` is what the orchestrator pays per run.

    python bench/checker_bench.py [--sizes 100000,1000000,2000000] [--repeat 2] [--no-read]

`--stream-events 1000000,10000000` instead measures the streaming check: the same kind of
synthetic run (1000 keys), generated op by op and folded by check_run as it comes (no op is
kept: the history of 10^7 events would be about 6 x 10^7 ops), each size in a fresh
process: CPU and wall seconds, and the process's peak RSS with what it costs per event.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.checker import FinalState, check_run  # noqa: E402
from chaos.history import history_dir, read_history  # noqa: E402

OPS_PER_EVENT = 6  # publish invoke/ok, deliver, apply invoke/ok, ack (plus a redelivery in 7)


def synthetic_history(n_ops: int, seed: int = 1, consumers: int = 4) -> tuple[list[dict], FinalState]:
    """A busy run: events on 1000 keys, 4 consumers, a fault, some redeliveries and reorders,
    `locked_at` on every write and a lost COMMIT reply (an unknown-outcome apply) in 1 of 50."""
    rng = random.Random(seed)
    ops: list[dict] = []
    clock = 1000.0
    version_of: dict[str, int] = {}
    rows: dict[str, dict] = {}
    projection: dict[str, int] = {}
    names = [f"C{i + 1}" for i in range(consumers)]

    def emit(process: str, type_: str, f: str, **fields: object) -> None:
        nonlocal clock
        clock += 0.00001
        ops.append({"time": clock, "process": process, "type": type_, "f": f, **fields})

    i = 0
    while len(ops) < n_ops:
        key = str(rng.randrange(1000))
        version = version_of[key] = version_of.get(key, 0) + 1
        ev = {"event_id": f"e{key}-{version}", "key": key, "version": version, "etype": f"s{version}"}
        entry = f"{1700000000000 + i}-0"
        consumer = names[i % consumers]
        emit("P-order", "invoke", "publish", **ev)
        emit("P-order", "ok", "publish", **ev, entry_id=entry, stream="orders")
        emit(consumer, "ok", "deliver", **ev, entry_id=entry, stream="orders", via="read", delivery_count=1)
        if i == n_ops // OPS_PER_EVENT // 2:
            emit("nemesis", "info", "fault", value={"name": "kill-consumer", "phase": "start"})
        if rng.random() < 1 / 7:
            emit(names[(i + 1) % consumers], "ok", "deliver", **ev, entry_id=entry, stream="orders",
                 via="claim", delivery_count=2)
        if rng.random() < 1 / 50:  # the COMMIT's reply was lost (it landed); applied again later
            emit(consumer, "invoke", "apply", **ev)
            emit(consumer, "info", "apply", **ev, value="server closed the connection unexpectedly")
            projection[key] = projection.get(key, 0) + 1
        emit(consumer, "invoke", "apply", **ev)
        emit(consumer, "ok", "apply", **ev, rows=1, effect="applied",
             value={"status": ev["etype"], "locked_at": clock - 0.000005})  # taken before COMMIT
        projection[key] = projection.get(key, 0) + 1
        emit(consumer, "ok", "ack", **ev, entry_id=entry)
        rows[key] = {"status": ev["etype"], "version": version}
        i += 1
    del ops[n_ops:]
    return ops, FinalState(rows=rows, projection=projection)


def streamed_history(events: int, seed: int = 1, consumers: int = 4, final: FinalState | None = None
                     ) -> Iterator[dict]:
    """synthetic_history's run of `events` events, op by op (nothing kept); `final` gets the
    rows and projection as the ops are made."""
    rng = random.Random(seed)
    clock = 1000.0
    version_of: dict[str, int] = {}
    final = final if final is not None else FinalState()
    rows, projection = final.rows, final.projection
    names = [f"C{i + 1}" for i in range(consumers)]
    for i in range(events):
        key = str(rng.randrange(1000))
        version = version_of[key] = version_of.get(key, 0) + 1
        ev = {"event_id": f"e{key}-{version}", "key": key, "version": version, "etype": f"s{version}"}
        entry = f"{1700000000000 + i}-0"
        consumer = names[i % consumers]
        batch = [("P-order", "invoke", "publish", ev), ("P-order", "ok", "publish", {**ev, "entry_id": entry, "stream": "orders"}),
                 (consumer, "ok", "deliver", {**ev, "entry_id": entry, "stream": "orders", "via": "read", "delivery_count": 1})]
        if i == events // 2:
            batch.append(("nemesis", "info", "fault", {"value": {"name": "kill-consumer", "phase": "start"}}))
        if rng.random() < 1 / 7:
            batch.append((names[(i + 1) % consumers], "ok", "deliver",
                          {**ev, "entry_id": entry, "stream": "orders", "via": "claim", "delivery_count": 2}))
        if rng.random() < 1 / 50:
            batch += [(consumer, "invoke", "apply", ev),
                      (consumer, "info", "apply", {**ev, "value": "server closed the connection unexpectedly"})]
            projection[key] = projection.get(key, 0) + 1
        batch.append((consumer, "invoke", "apply", ev))
        for process, kind, f, fields in batch:
            clock += 0.00001
            yield {"time": clock, "process": process, "type": kind, "f": f, **fields}
        clock += 0.00001
        yield {"time": clock, "process": consumer, "type": "ok", "f": "apply", **ev, "rows": 1, "effect": "applied",
               "value": {"status": ev["etype"], "locked_at": clock - 0.000005}}
        projection[key] = projection.get(key, 0) + 1
        clock += 0.00001
        yield {"time": clock, "process": consumer, "type": "ok", "f": "ack", **ev, "entry_id": entry}
        rows[key] = {"status": ev["etype"], "version": version}


def measure_stream(events: int) -> dict:
    """One streaming check of `events` synthetic events in this (fresh) process."""
    final = FinalState()
    ops = 0

    def counted() -> Iterator[dict]:
        nonlocal ops
        for op in streamed_history(events, final=final):
            ops += 1
            yield op
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall, cpu = time.perf_counter(), time.process_time()
    result = check_run(counted(), final)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"events": events, "ops": ops, "verdict": result.verdict, "published": result.counts.published,
            "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "ops_per_cpu_s": round(ops / cpu),
            "peak_rss_mb": round(peak), "rss_before_mb": round(before),
            "bytes_per_event": round((peak - before) * 2**20 / events)}


def timed(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds of `repeat` calls (CPU time is what a shared
    2-core machine's neighbours cannot inflate)."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu


def measure(size: int, repeat: int, read: bool) -> dict:
    """One size, in a fresh process so earlier sizes' freed memory does not skew it."""
    ops, state = synthetic_history(size)
    check_s, check_cpu_s = timed(lambda: check_run(ops, state), repeat)
    entry = {"ops": len(ops), "check_s": round(check_s, 3), "check_cpu_s": round(check_cpu_s, 3),
             "ops_per_s": round(len(ops) / check_s)}
    if read:
        with tempfile.TemporaryDirectory() as tmp:
            write_history(ops, Path(tmp))
            del ops
            read_s, read_cpu_s = timed(lambda: read_history(Path(tmp)), 1)
            entry.update(read_s=round(read_s, 3), read_cpu_s=round(read_cpu_s, 3))
    return entry


def write_history(ops: list[dict], run_dir: Path) -> None:
    directory = history_dir(run_dir)
    directory.mkdir(parents=True)
    files = {}
    try:
        for op in ops:
            fh = files.get(op["process"])
            if fh is None:
                fh = files[op["process"]] = open(directory / f"{op['process']}.jsonl", "w")
            fh.write(json.dumps(op, separators=(",", ":")) + "\n")
    finally:
        for fh in files.values():
            fh.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,2000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-read", action="store_true", help="skip the read_history timing")
    parser.add_argument("--stream-events", default="", help="streaming check of these event counts instead")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one size here
    parser.add_argument("--one-stream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_stream:
        print(json.dumps(measure_stream(args.one_stream)))
        return 0
    if args.stream_events:
        out = []
        for n in (int(x) for x in args.stream_events.split(",")):
            load = os.getloadavg()[0]
            run = subprocess.run([sys.executable, __file__, "--one-stream", str(n)], check=True,
                                 capture_output=True, text=True)
            out.append({**json.loads(run.stdout), "load_before": round(load, 1), "load_after": round(os.getloadavg()[0], 1)})
        print(json.dumps({"bench": "checker-stream", "keys": 1000, "sizes": out}))
        return 0
    if args.one:
        print(json.dumps(measure(args.one, args.repeat, not args.no_read)))
        return 0
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    results = []
    for size in sizes:
        cmd = [sys.executable, __file__, "--one", str(size), "--repeat", str(args.repeat)]
        if args.no_read:
            cmd.append("--no-read")
        results.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    by_size = {r["ops"]: r for r in results}
    ratio = cpu_ratio = None
    if 1000000 in by_size and 2000000 in by_size:
        ratio = round(by_size[2000000]["check_s"] / by_size[1000000]["check_s"], 2)
        cpu_ratio = round(by_size[2000000]["check_cpu_s"] / by_size[1000000]["check_cpu_s"], 2)
    one_m = by_size.get(1000000)
    print(json.dumps({
        "bench": "checker", "sizes": results, "ratio_2m_over_1m": ratio,
        "cpu_ratio_2m_over_1m": cpu_ratio, "load_avg_1m": os.getloadavg()[0],
        "target": {"check_1m_s": 5.0, "ratio_max": 2.3},
        # judged on CPU time: check_run is single-threaded and does no I/O, so on a quiet machine
        # wall == CPU, while neighbours on a shared machine inflate wall time unevenly
        "meets_target": None if one_m is None or cpu_ratio is None else one_m["check_cpu_s"] < 5.0 and cpu_ratio <= 2.3,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
