"""Load benchmark: end-to-end events/s, the load cells at full size, cost growth, the failover
cell's phases; prints one JSON object with every target marked met or not.

Every figure comes from a real run through the orchestrator (chaos.run.run_cell): gated
producer, consumer processes, the checker. Sections (--only picks some):

* throughput: bulk jobs at cost 0, 1/2/4 consumers in one group (COUNT 100, one XACK per
  read batch, no effect write: the harness itself), with every worker's links straight to
  the servers (direct) and through its own proxies (proxy). events/s = handled events /
  (first publish -> last effect), the median of --repeat runs. Targets: the seed lab's Node.js consumers, 11,338/s with
  one consumer and 30,375/s with four (direct), and proxy >= 0.5 x direct.
* faults: the load area's cells (chaos/expectations/load.py) at a size (default full:
  10^5 events over 10^3 orders) for `recommended` under each fault and all three: wall time
  (target < 30 s), verdict and counts, time by phase, the checker's share, the CPU seconds by
  kind of process (less at the mercy of the shared machine than the wall time), and the peak RSS
  of every process (sampled every 0.2 s; workers named from the history's spawn ops).
* growth: the throughput run with 4 consumers through the proxies at 10^4, 10^5 and 10^6
  events: wall time per size and the ratio per doubling (1.0 = linear), the check's share of
  the wall time and the orchestrator's CPU seconds by phase (the check's CPU moves much less
  with the machine's load than its wall time), and the history's live fold (`fold`: the nice
  its thread ran at, the ops and CPU seconds it folded during the run and those left to the
  check). 10^6 is skipped when the 10^5 run says it would take more than
  --max-growth-s.
* failover: `s1` under promote-replica, 3 runs at time scale 0.25: each phase's mean time.

The machine is shared: every section records the 1-minute load average before and after.

    python bench/load_bench.py [--only throughput,faults,growth,failover] [--size full|ci]
"""
from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import platform
import shutil
import sys
import threading
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

import chaos.strategies  # noqa: E402,F401 - parts load in dependency order
from chaos.cluster import start_cluster  # noqa: E402
from chaos.cluster.endpoint import pg_dsn, redis_url  # noqa: E402
from chaos.expectations.load import cells, load_size  # noqa: E402
from chaos.history import history_dir, read_file  # noqa: E402
from chaos.orchestrator import livefold  # noqa: E402
from chaos.run import run_cell  # noqa: E402

REFERENCE_1 = 11_338     # seed 003's lab, one Node.js consumer, 20,000 jobs
REFERENCE_4 = 30_375     # the same with four
PROXY_RATIO_TARGET = 0.5
FAULT_CELL_TARGET_S = 30.0
SECTIONS = ("throughput", "faults", "growth", "failover")


def load() -> float:
    return round(os.getloadavg()[0], 2)


class Direct:
    """The cluster with every worker's links straight to the servers (no proxy in the path)."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    def worker_links(self, name: str) -> Any:
        links = self._cluster.worker_links(name)
        return replace(links, redis_url=redis_url(self._cluster.primary), replica_url=redis_url(self._cluster.replica),
                       pg_dsn=pg_dsn(self._cluster.postgres))


class PeakMemory:
    """Peak RSS of this process and every descendant (workers, servers, proxy), by pid, and the
    CPU seconds each used (user + system at its last sample: a figure that depends much less
    than the wall time on what else the shared machine runs).

    The process tree is listed every `tree_every_s` (psutil's recursive children() reads every
    /proc/<pid>/stat of the machine: on the shared box that was most of this sampler's CPU,
    counted in the orchestrator's figure); the known processes are sampled every `interval_s`.
    The sampler's own CPU is measured and kept out of the orchestrator's figure (`sampler_cpu_s`)."""

    def __init__(self, interval_s: float = 0.2, tree_every_s: float = 1.0) -> None:
        self.interval_s, self.tree_every_s, self.peak, self.names = interval_s, tree_every_s, {}, {}
        self.cpu: dict[int, float] = {}
        self.cpu_before: dict[int, float] = {}
        self.own: list[tuple[float, float]] = []   # (monotonic time, this process's CPU s) at each sample
        self.sampler_cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        me = psutil.Process()
        for proc in [me, *me.children(recursive=True)]:   # what the servers had used before the cell
            try:
                times = proc.cpu_times()
                self.cpu_before[proc.pid] = times.user + times.system
            except psutil.Error:
                continue
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        procs: dict[int, psutil.Process] = {}
        listed = float("-inf")
        while not self._stop.is_set():
            if time.monotonic() - listed >= self.tree_every_s:
                listed = time.monotonic()
                for proc in [me, *me.children(recursive=True)]:
                    procs.setdefault(proc.pid, proc)
            for pid, proc in list(procs.items()):
                try:
                    with proc.oneshot():
                        times = proc.cpu_times()
                        rss = proc.memory_info().rss
                    self.cpu[pid] = times.user + times.system
                    if pid == me.pid:
                        self.own.append((time.monotonic(), self.cpu[pid]))
                    if pid not in self.names:
                        self.names[pid] = _label(proc, me.pid)
                    if rss > self.peak.get(pid, 0):
                        self.peak[pid] = rss
                except psutil.Error:
                    procs.pop(pid, None)   # gone: its last sample stands
            self._stop.wait(self.interval_s)
        self.sampler_cpu_s = time.thread_time()

    def cpu_by_name(self, workers: dict[int, str]) -> dict[str, float]:
        """CPU seconds used during the cell by kind of process (consumers `C*` and producers
        `P-*` summed; every PostgreSQL process under `postgres`), most first; this sampler's
        own CPU apart (`bench sampler`), not in the orchestrator's."""
        out: dict[str, float] = defaultdict(float)
        me = os.getpid()
        for pid, cpu in self.cpu.items():
            name = workers.get(pid) or self.names.get(pid, str(pid))
            head, _, tail = name.rpartition(" ")
            kind = ("consumers" if name.startswith("C") else "producers" if name.startswith("P-")
                    else head if tail.isdigit() else name)
            out[kind] += cpu - self.cpu_before.get(pid, 0.0) - (self.sampler_cpu_s if pid == me else 0.0)
        out["bench sampler (in this process)"] = self.sampler_cpu_s
        return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def own_cpu_between(self, start: float, end: float) -> float:
        """This process's CPU seconds from `start` to `end` (monotonic), interpolated between
        the samples (0.2 s apart; the sampler's own CPU, listing the tree once a second, is in it)."""
        def at(t: float) -> float:
            samples = self.own
            if not samples:
                return 0.0
            i = bisect.bisect_left(samples, t, key=lambda s: s[0])
            if i == 0:
                return samples[0][1]
            if i == len(samples):
                return samples[-1][1]
            (t0, c0), (t1, c1) = samples[i - 1], samples[i]
            return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1
        return at(end) - at(start)

    def by_name(self, workers: dict[int, str]) -> dict[str, float]:
        """MB per process, workers named from the run's history."""
        out: dict[str, float] = {}
        for pid, rss in self.peak.items():
            name = workers.get(pid) or self.names.get(pid, str(pid))
            out[name] = max(out.get(name, 0.0), round(rss / 2**20, 1))
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

class FoldsSeen:
    """The live folds (chaos.orchestrator.livefold.HistoryFold) of the runs inside it: how far
    each got while the run wrote its history (ops, its thread's CPU s, the nice it ran at) and
    what was left to the check (`finish`: its ops and CPU s, in the check's thread)."""

    def __init__(self) -> None:
        self.folds: list[dict[str, Any]] = []

    def __enter__(self) -> FoldsSeen:
        self._finish = finish = livefold.HistoryFold.finish
        seen = self.folds

        def noted(fold: livefold.HistoryFold) -> Any:
            live = {"nice": fold.nice, "nice_refused": fold.nice_refused or None, "void": fold.void or None,
                    "live_ops": fold.folded_ops, "live_cpu_s": round(fold.fold_cpu_s, 2)}
            try:
                return finish(fold)
            finally:
                seen.append({**live, "rest_ops": fold.folded_ops - live["live_ops"],
                             "rest_cpu_s": round(fold.fold_cpu_s - live["live_cpu_s"], 2)})
        livefold.HistoryFold.finish = noted   # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        livefold.HistoryFold.finish = self._finish   # type: ignore[method-assign]


def _label(proc: psutil.Process, me: int) -> str:
    if proc.pid == me:
        return "orchestrator+checker (this process)"
    cmd = " ".join(proc.cmdline())
    if "forkserver" in cmd and proc.ppid() != me:
        # a worker forked by the fork server keeps its command line: not the server itself
        return f"worker {proc.pid} (forked)"
    for needle, name in (("redis-server", "redis-server"), ("valkey-server", "valkey-server"),
                         ("postgres", "postgres"), ("chaos.proxy", "proxy"), ("forkserver", "fork server")):
        if needle in cmd:
            return f"{name} {proc.pid}" if name in ("redis-server", "valkey-server") else name
    return f"{proc.name()} {proc.pid}"


def spawned(run_dirs: list[Path]) -> dict[int, str]:
    """pid -> worker name, from the orchestrator's spawn ops (its own history file)."""
    out = {}
    for run_dir in run_dirs:
        path = history_dir(run_dir) / "orchestrator.jsonl"
        for op in (read_file(path) if path.exists() else []):
            value = op.get("value")
            if op["f"] == "log" and isinstance(value, dict) and "spawned" in value:
                out[value["pid"]] = value["spawned"]
    return out


def phase_times(result: Any) -> dict[str, float]:
    """Seconds per phase name, summed over the cell's runs (fault phases by fault)."""
    out: dict[str, float] = defaultdict(float)
    for phase in getattr(result, "phases", []) or []:
        out[phase.name] += phase.end - phase.start
    return {k: round(v, 3) for k, v in out.items()}


# what a reader of the harness runs' JSON needs to know about their verdict
HARNESS_VERDICT_NOTE = ("invalid by design: the harness parts write no effect, so every key's final state is "
                        "wrong (wrong_keys); lost and duplicated still count")


def harness_parts(consumers: int, jobs: int) -> dict[str, str]:
    return {"delivery": f"group:consumers={consumers},count=100", "ack": "after:batch=1", "guard": "noop",
            "workload": f"bulk:jobs={jobs},cost_ms=0", "producer": "direct"}


def harness_run(cluster: Any, consumers: int, jobs: int, memory: bool = False) -> dict[str, Any]:
    """One harness cell; with `memory`, the peak RSS of the orchestrator with its checker (this
    process) and of every other process, sampled every 0.2 s."""
    peak = PeakMemory() if memory else None
    started = time.monotonic()
    if peak is not None:
        peak.__enter__()
    try:
        # (the run dir is kept until its spawn ops name the workers' pids, then removed)
        with FoldsSeen() as folds:
            result = run_cell(cluster, "baseline", [], parts=harness_parts(consumers, jobs), keep_runs="always")
    finally:
        if peak is not None:
            peak.__exit__(None, None, None)
    wall = time.monotonic() - started
    try:
        workers = spawned(result.run_dirs)
    finally:
        shutil.rmtree(result.run_root, ignore_errors=True)
    metrics = result.metrics[0]
    phases = phase_times(result)
    # (no effect write: the final-state check fails by design; lost and duplicated still count).
    # `handled` is the work notes' figure (events handled during the work); `counts` every count
    # of the checker (published, handled, lost, duplicated, unattempted, dropped, indeterminate,
    # pending_left, undelivered, ...), so a `handled` below `events` is explained by them
    out = {"consumers": consumers, "events": jobs, "lost": result.counts.lost,
           "duplicated": result.counts.duplicated, "handled": metrics.handled,
           "verdict": result.verdict, "verdict_note": HARNESS_VERDICT_NOTE, "counts": result.counts.as_dict(),
           "unknown_reasons": [r for run in result.runs for r in run.unknown_reasons],
           "drain_end": [run.drain_end for run in result.runs],
           "work_s": round(metrics.work_s or 0, 3), "events_per_s": round(metrics.throughput or 0),
           "wall_s": round(wall, 2), "phases_s": phases,
           "check_share": round(phases.get("check", 0.0) / wall, 3) if wall else None,
           # planning the workload, starting the run dir, summarizing: the wall time outside the phases
           "outside_phases_s": round(wall - sum(v for k, v in phases.items() if not k.startswith("fault:")), 2),
           # the history folded during the run (live: its thread's nice, ops and CPU s) and left to the check (rest)
           "fold": folds.folds[0] if len(folds.folds) == 1 else folds.folds}
    if peak is not None:
        # the orchestrator's own CPU seconds by phase: what the check costs it, whatever else the
        # shared machine runs (the wall share above moves with the load; this much less)
        cpu: dict[str, float] = defaultdict(float)
        for phase in getattr(result, "phases", []) or []:
            if not phase.name.startswith("fault:"):
                cpu[phase.name] += peak.own_cpu_between(phase.start, phase.end)
        out["orchestrator_cpu_s_by_phase"] = {k: round(v, 2) for k, v in cpu.items()}
        by_name = peak.by_name(workers)
        out["peak_rss_mb"] = by_name.get("orchestrator+checker (this process)")
        out["peak_rss_mb_by_process"] = by_name
    return out


def throughput(cluster: Any, jobs: int, counts: list[int], repeat: int) -> dict[str, Any]:
    """Each figure is the median of `repeat` runs, direct and proxy runs interleaved (the
    machine is shared: a burst of someone else's load then hits both sides alike)."""
    out: dict[str, Any] = {"load_before": load(), "repeat": repeat, "direct": {}, "proxy": {}}
    tries: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for _ in range(repeat):
        for n in counts:
            for mode, target in (("direct", Direct(cluster)), ("proxy", cluster)):
                tries[mode, n].append(harness_run(target, n, jobs))
    for (mode, n), runs in tries.items():
        runs.sort(key=lambda r: r["events_per_s"])
        out[mode][str(n)] = {**runs[len(runs) // 2], "all_events_per_s": [r["events_per_s"] for r in runs]}
    rate = {mode: {n: out[mode][str(n)]["events_per_s"] for n in counts} for mode in ("direct", "proxy")}
    out["proxy_over_direct"] = {str(n): round(rate["proxy"][n] / max(1, rate["direct"][n]), 2) for n in counts}
    targets = {}
    if 1 in counts:
        targets["direct_1_consumer_>=_11338"] = {"measured": rate["direct"][1], "met": rate["direct"][1] >= REFERENCE_1}
        targets["proxy_1_consumer_>=_11338"] = {"measured": rate["proxy"][1], "met": rate["proxy"][1] >= REFERENCE_1}
    if 4 in counts:
        targets["direct_4_consumers_>=_30375"] = {"measured": rate["direct"][4], "met": rate["direct"][4] >= REFERENCE_4}
        targets["proxy_4_consumers_>=_30375"] = {"measured": rate["proxy"][4], "met": rate["proxy"][4] >= REFERENCE_4}
    targets["proxy_>=_0.5_x_direct"] = {"measured": out["proxy_over_direct"],
                                        "met": all(v >= PROXY_RATIO_TARGET for v in out["proxy_over_direct"].values())}
    out["targets"] = targets
    out["load_after"] = load()
    return out


def fault_cells(cluster: Any, size_name: str, pick: list[str]) -> dict[str, Any]:
    size = load_size(size_name)
    out: dict[str, Any] = {"size": size_name, "events": size.total, "workload": size.workload, "cells": {}}
    for cell in cells(size):
        if not cell.preset.startswith("recommended") or (pick and not any(p in cell.id for p in pick)):
            continue
        before = load()
        with PeakMemory() as memory:
            started = time.monotonic()
            # every run dir stays until its pids are read; then only those of runs that did not pass
            result = run_cell(cluster, cell.preset, list(cell.faults), parts=dict(cell.parts),
                              keep_runs="always", raise_fault_errors=False)
            wall = time.monotonic() - started
        try:
            workers = spawned(result.run_dirs)
            peak, cpu = memory.by_name(workers), memory.cpu_by_name(workers)
        finally:
            kept = keep_failed_runs(result)
        phases = phase_times(result)
        counts = result.counts.as_dict()
        out["cells"][cell.id] = {
            "wall_s": round(wall, 2), "target_wall_s": FAULT_CELL_TARGET_S, "met": wall < FAULT_CELL_TARGET_S,
            "verdict": result.verdict, "unknown_reasons": [r for run in result.runs for r in run.unknown_reasons],
            "counts": {k: counts[k] for k in ("published", "lost", "duplicated", "redelivered", "reordered",
                                              "wrong_keys", "pending_left", "handled")},
            "phases_s": phases, "checker_share": round(phases.get("check", 0.0) / wall, 3) if wall else None,
            "peak_rss_mb": peak, "cpu_s": cpu, "run_dirs_kept": kept,
            "load_before": before, "load_after": load()}
    return out


def keep_failed_runs(result: Any) -> list[str]:
    """Remove the dirs of the runs that passed (and the cell's dir if none is left); the
    others' paths, for the JSON (under the cluster's kept dir: rundirs.retain bounds them)."""
    kept = []
    for run, path in zip(result.runs, result.run_dirs):
        if run.verdict == "valid":
            shutil.rmtree(path, ignore_errors=True)
        else:
            kept.append(str(path))
    if not kept:
        shutil.rmtree(result.run_root, ignore_errors=True)
    return kept


def growth(cluster: Any, sizes: list[int], max_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {"consumers": 4, "links": "proxy", "load_before": load(), "runs": {}}
    done: list[tuple[int, float]] = []
    for n in sizes:
        if done:
            last_n, last_s = done[-1]
            projected = last_s * n / last_n
            if projected > max_s:
                out["runs"][str(n)] = {"skipped": f"projected {projected:.0f} s > {max_s:.0f} s (from the "
                                                  f"{last_n:,}-event run, assuming linear growth)"}
                continue
        run = harness_run(cluster, 4, n, memory=True)
        out["runs"][str(n)] = run
        done.append((n, run["wall_s"]))
    def per_doubling(key: Any) -> dict[str, float]:
        """(t2/t1)^(1/log2(n2/n1)) / 2 between consecutive sizes: 1.0 = linear."""
        runs = [(n, key(out["runs"][str(n)])) for n, _ in done]
        return {f"{n1}->{n2}": round((t2 / t1) ** (1 / math.log2(n2 / n1)) / 2, 3)
                for (n1, t1), (n2, t2) in zip(runs, runs[1:]) if t1 and t2}

    out["ratio_per_doubling"] = {"wall": per_doubling(lambda r: r["wall_s"]),
                                 "work": per_doubling(lambda r: r["work_s"]),
                                 "check": per_doubling(lambda r: r["phases_s"].get("check", 0.0))}
    wall = out["ratio_per_doubling"]["wall"]
    out["linear"] = {"target": "wall ratio per doubling <= 1.1 (1.0 = linear)",
                     "met": all(r <= 1.1 for r in wall.values()) if wall else None}
    out["load_after"] = load()
    return out


def failover(cluster: Any, runs: int) -> dict[str, Any]:
    before = load()
    started = time.monotonic()
    result = run_cell(cluster, "s1", ["promote-replica"], runs=runs, time_scale=0.25, keep_runs="never",
                      raise_fault_errors=False)
    wall = time.monotonic() - started
    phases = {k: round(v / runs, 3) for k, v in phase_times(result).items()}
    return {"cell": "s1 x promote-replica, time scale 0.25", "runs": runs, "verdict": result.verdict,
            "wall_s": round(wall, 2), "per_run_s": round(wall / runs, 2), "mean_phase_s": phases,
            "notes": list(getattr(result, "notes", []) or []), "load_before": before, "load_after": load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections: {', '.join(SECTIONS)}")
    parser.add_argument("--jobs", type=int, default=50_000, help="events of each throughput run")
    parser.add_argument("--repeat", type=int, default=3, help="throughput runs per figure (the median is kept)")
    parser.add_argument("--consumers", default="1,2,4")
    parser.add_argument("--size", default="full", help="load cells' size: full (10^5) or ci (2,000)")
    parser.add_argument("--cells", default="", help="comma-separated parts of cell ids to run (default all)")
    parser.add_argument("--growth", default="10000,100000,1000000")
    parser.add_argument("--max-growth-s", type=float, default=900.0)
    parser.add_argument("--failover-runs", type=int, default=3)
    args = parser.parse_args()
    sections = [s for s in args.only.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown section(s) {sorted(unknown)}; sections are {', '.join(SECTIONS)}")
    out: dict[str, Any] = {
        "bench": "load", "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                     "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
                                     "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}}
    cluster = start_cluster("native", f"loadbench-{os.getpid()}")
    try:
        if "throughput" in sections:
            out["throughput"] = throughput(cluster, args.jobs, [int(c) for c in args.consumers.split(",")],
                                           args.repeat)
        if "faults" in sections:
            out["faults"] = fault_cells(cluster, args.size, [c for c in args.cells.split(",") if c])
        if "growth" in sections:
            out["growth"] = growth(cluster, [int(n) for n in args.growth.split(",")], args.max_growth_s)
        if "failover" in sections:
            out["failover"] = failover(cluster, args.failover_runs)
    finally:
        cluster.close()
        if "chaos.workload.forkserver" in sys.modules:   # started by the first run: reaped now,
            sys.modules["chaos.workload.forkserver"].close_fork_server()   # not left behind
    out["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
