"""pause: SIGSTOP a worker for a window, then SIGCONT (a GC pause, a stalled VM)."""
from __future__ import annotations

import signal
from typing import Any

from chaos.params import Param
from faults.effects import STOPPED_MID_WORK
from faults.helpers import pick_worker, process_alive
from faults.interface import FaultContext
from faults.window import WindowFault


class Pause(WindowFault):
    name = "pause"
    effect = STOPPED_MID_WORK   # the worker stopped while work was in flight
    description = "SIGSTOP one worker for a window, then SIGCONT it"
    params = (
        Param("role", "consumer", "the role of the worker"),
        Param("target", "", "its process name (empty: drawn from the run's seed)"),
        Param("at_ms", 200, "when it stops"),
        Param("duration_ms", 1000, "how long it stays stopped"),
    )

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        self.worker = pick_worker(ctx, self.role, self.target)
        self.worker.kill(signal.SIGSTOP)
        return {"worker": self.worker.name, "pid": self.worker.pid}

    def stop(self, ctx: FaultContext) -> list[str]:
        worker = getattr(self, "worker", None)
        if worker is not None and process_alive(worker.pid):
            try:
                worker.kill(signal.SIGCONT)
            except Exception as exc:  # noqa: BLE001
                return [f"SIGCONT {worker.name}: {exc}"]
        return []
