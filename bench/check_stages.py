"""Where the orchestrator's memory goes by stage of one growth run (bench/load_bench.py's
harness cell: bulk jobs at cost 0, four consumers through the proxies, keys = events); prints
one JSON object.

The run is load_bench's `harness_run`; the run's phases (planning the workload, reset, arm,
workload, drain) and the check's stages (reading the final state, the checker's scan of the
history, folding the final lists in, counting, the final state's comparison, the notes'
measure) are wrapped to record this process's RSS (and the kernel's high-water mark, VmHWM) as
each begins and ends, and a thread samples the RSS every 0.2 s to name the stage in which it
peaked. What a stage adds is what it keeps (or what the allocator did not give back).
`hwm_rise_mb` says by how much the high-water mark rose inside each stage's calls, the
checker's scans and the progress watch's polls included (called again and again: not logged
one by one); a rise outside every wrapped call is a part not wrapped.

    python bench/check_stages.py [--events 1000000]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402

import chaos.checker as checker  # noqa: E402
import chaos.history as history  # noqa: E402
import chaos.orchestrator.check as checking  # noqa: E402
import chaos.orchestrator.phases as phases  # noqa: E402
import chaos.orchestrator.sequence as sequence  # noqa: E402
import chaos.workload.progress as progress  # noqa: E402
from chaos.cluster import start_cluster  # noqa: E402
from load_bench import harness_run, load  # noqa: E402

STAGES = [(phases, "plan_workload"), (phases, "reset"), (phases, "arm"), (phases, "workload"), (sequence, "drain"),
          (checking, "check"), (checking, "read_final"), (checking, "measure"), (checker._RunScan, "scan"),
          (checker, "_absorb_final"), (checker, "_count_events"), (checker, "_check_final_state"),
          (progress.ProgressWatch, "poll")]
QUIET = {"scan", "poll"}   # called again and again (the fold's batches, the watch's polls): not logged, only their rise


def hwm_mb() -> float:
    """The kernel's high-water mark of this process's RSS (VmHWM), which no sample can miss."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Stages:
    """RSS at each wrapped stage's start and end, and the peak with the stage it fell in."""

    def __init__(self) -> None:
        self.proc, self.t0 = psutil.Process(), time.monotonic()
        self.log: list[list[Any]] = []
        self.rise: dict[str, float] = {}   # stage -> how far the kernel's high-water mark rose during its calls
        self.stage, self.peak_mb, self.peak_stage = "before the check", 0.0, ""
        self._stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def rss_mb(self) -> float:
        return round(self.proc.memory_info().rss / 2**20, 1)

    def mark(self, name: str) -> None:
        self.stage = name
        self.log.append([round(time.monotonic() - self.t0, 1), name, self.rss_mb(), hwm_mb()])

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            rss = self.rss_mb()
            if rss > self.peak_mb:
                self.peak_mb, self.peak_stage = rss, self.stage

    def wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)   # (an AttributeError here: a stage was renamed; update STAGES)

        @functools.wraps(original)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            before = hwm_mb()
            if name not in QUIET:
                self.mark(f"> {name}")
            try:
                return original(*args, **kwargs)
            finally:
                rise = hwm_mb() - before
                if rise:
                    self.rise[name] = round(self.rise.get(name, 0.0) + rise, 1)
                if name not in QUIET:
                    self.mark(f"< {name}")
        setattr(owner, name, wrapped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    stages = Stages()
    for owner, name in STAGES:
        stages.wrap(owner, name)
    passes = history.HistorySource.passes
    whole: set[str] = set()

    def noted_passes(self: history.HistorySource, fold: Any) -> Any:
        try:
            return passes(self, fold)
        finally:
            whole.update(self.sort_whole)
    history.HistorySource.passes = noted_passes   # (a file read whole is a stage's worth of memory)
    counts: dict[str, int] = {}
    check_run = checking.check_run

    def counted_check(*args: Any, **kwargs: Any) -> Any:
        result = check_run(*args, **kwargs)
        counts.update(result.counts.as_dict(), verdict=result.verdict)
        return result
    checking.check_run = counted_check   # (the run's counts beside the memory: what the check found)
    load_before = load()
    cluster = start_cluster("native", f"stages-{os.getpid()}")
    try:
        stages.mark("cluster up")
        run = harness_run(cluster, 4, args.events, memory=True)
        stages.mark("run done")
    finally:
        cluster.close()
        if "chaos.workload.forkserver" in sys.modules:
            sys.modules["chaos.workload.forkserver"].close_fork_server()
    print(json.dumps({"bench": "check_stages", "events": args.events, "load_before": load_before,
                      "load_after": load(), "peak_rss_mb": stages.peak_mb, "peak_in": stages.peak_stage,
                      # the kernel's own high-water mark of this process (the samples are 0.2 s apart)
                      "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "hwm_rise_mb": stages.rise, "files_read_whole": sorted(whole), "stages": stages.log,
                      "counts": counts, "run": run}))


if __name__ == "__main__":
    main()
