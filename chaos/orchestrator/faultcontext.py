"""The FaultContext a fault acts through in an orchestrated run (docs/INTERFACES.md section 7)."""
from __future__ import annotations

import json
import random
import time
from typing import Any

from chaos.orchestrator.run import Run
from chaos.orchestrator.workers import POLL_S, WorkerHandle
from chaos.workload import failpoints as fp
from faults.context import FaultContextBase


class RunContext(FaultContextBase):
    """The FaultContext of one run (docs/INTERFACES.md section 7); scale, sleep and resume
    are the one fault context base's (faults/context.py)."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self.cluster = run.cell.cluster
        self.rng = random.Random(f"fault:{run.seed}")
        self.stop_event = run.stop_event
        self.time_scale = run.cell.time_scale
        self.run_dir = run.dir

    def workers(self, role: str) -> list[WorkerHandle]:
        """Live and dead incarnations' latest handles by role, kind or process name."""
        handles = list(self._run.workers.current.values())
        return [h for h in handles if role in (h.plan.role, h.plan.kind, h.name, h.plan.name)]

    def wait_failpoint(self, name: str, timeout_ms: float) -> tuple[WorkerHandle, dict]:
        """The first worker stopped at failpoint `name` (its marker taken) within `timeout_ms`
        (scaled) and a second. A wait begun while the run goes on ends when the run stops (its
        workload over: nobody is coming, and the heal joins this fault: a poll for later arrivals
        used to hold every heal for up to its whole wait); one begun after (a heal's own look) has
        its time."""
        from faults.interface import FaultError
        deadline = time.monotonic() + self.scale(timeout_ms) + 1.0
        directory = fp.failpoint_dir(self.run_dir)
        stopped_before = self.stop_event.is_set()
        while time.monotonic() < deadline:
            for marker in sorted(directory.glob(f"*.{name}")) if directory.is_dir() else []:
                process = marker.name[: -len(name) - 1]
                info = json.loads(marker.read_text() or "{}")
                marker.unlink()
                handle = self._run.workers.current.get(process)
                if handle is not None:
                    return handle, info
            if not stopped_before and self.stop_event.is_set():
                raise FaultError(f"no worker reached failpoint {name!r} before the run stopped")
            time.sleep(POLL_S)
        raise FaultError(f"no worker reached failpoint {name!r} within {timeout_ms} ms "
                         f"(is it armed with action=signal for the right role?)")

    def record(self, phase: str, **value: Any) -> None:
        self._run.nemesis.op("info", "fault", value={"phase": phase, **value})
