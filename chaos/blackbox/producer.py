"""The framework's producer of a black-box run: one worker process (chaos.workload.worker)
publishing the run's events in the encoding the team's config names."""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chaos
from chaos.blackbox.config import WorkerConfig
from chaos.blackbox.workers import TAIL_LINES
from chaos.cluster import spawner
from chaos.history import history_dir
from chaos.orchestrator import wait
from chaos.workload.procutil import tail
from chaos.workload.workerspec import WorkerSpec

PRODUCER = "P-order"
PRODUCER_POLL_S = 0.02  # how often the producer's wait looks at it and at the rig watcher's findings


class FrameworkProducer:
    """Start (`start`), wait for its first publish (`wait_first_publish`) and its end (`wait`), `stop`."""

    def __init__(self, cluster: Any, config: WorkerConfig, run_dir: Path, time_scale: float, seed: int) -> None:
        self.cluster, self.config, self.run_dir, self.scale, self.seed = cluster, config, run_dir, time_scale, seed
        self.proc: Any = None

    def start(self, events: list[Any], failpoints: dict[str, dict] | None = None) -> None:
        links = self.cluster.worker_links(PRODUCER)
        # No "t0": the producer's schedule starts when its interpreter is ready (a shared t0
        # in the past would fire every retry at once); the faults start at its first publish.
        cfg = self.config
        spec = WorkerSpec(
            name=PRODUCER, role="producer", run_dir=str(self.run_dir), time_scale=self.scale, seed=self.seed,
            redis_url=links.redis_url, pg_dsn=links.pg_dsn, sentinels=tuple(getattr(links, "sentinels", ())),
            master_name=getattr(links, "master_name", ""), failpoints=dict(failpoints or {}),
            role_spec={"producer": {"name": "retrying", "params": {}},
                       "events": [e.routed(cfg.worker.stream).to_dict() for e in events],
                       "encoder": {"format": cfg.encoder.format, "fields": cfg.encoder.fields,
                                   "task_name": cfg.encoder.task_name,
                                   "poison": cfg.poison.fields if cfg.poison else {}}})
        path = self.run_dir / f"{PRODUCER}.spec.json"
        path.write_text(json.dumps(spec.to_json()), encoding="utf-8")
        root = str(Path(chaos.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.proc = spawner.spawn([sys.executable, "-m", "chaos.workload.worker", str(path)],
                                  log=self.run_dir / f"{PRODUCER}.log", env=env)

    def handle(self) -> Any:
        """The running producer as a fault's WorkerHandle (a failpoint's resume SIGCONTs it)."""
        from faults.local import ProcessHandle
        return ProcessHandle(PRODUCER, self.proc)

    def wait_first_publish(self, check_rig: Callable[[], None], timeout_s: float = 30.0) -> None:
        """Until the producer wrote its first op: a slow interpreter start must not let a
        fault at at_ms=500 fire before the first event is out."""
        path = history_dir(self.run_dir) / f"{PRODUCER}.jsonl"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if path.exists() and b'"f":"publish"' in path.read_bytes():
                break
            check_rig()
            time.sleep(0.002)

    def wait(self, events: list[Any], check_rig: Callable[[], None], reasons: list[str]) -> None:
        """Until the producer exits (a failing one is the framework's error), within its budget
        (the one wait, hard-bounded: a producer past it is a reason, verdict unknown)."""
        budget = (len(events) * self.config.workload.gap_ms + 3000) * self.scale / 1000 + 30
        if wait.watch(lambda: self.proc.poll() is not None, budget, wait.NoProgress(), 0.0, check_rig,
                      slow_factor=0.0, sleep_s=PRODUCER_POLL_S) is not None:
            reasons.append(f"the producer did not finish within {budget:.0f} s")
            return
        if self.proc.returncode != 0:
            raise RuntimeError(f"the framework's producer exited with {self.proc.returncode}:\n"
                               f"{tail(self.run_dir / f'{PRODUCER}.log', TAIL_LINES)}")

    def stop(self) -> None:
        if self.proc is not None:
            spawner.stop(self.proc, signal.SIGTERM, timeout=3.0)
