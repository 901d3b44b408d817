"""sigterm: a rolling deploy: SIGTERM a worker, give it a grace period, then SIGKILL."""
from __future__ import annotations

import signal
import time

from chaos.params import Param
from faults.effects import DIED_MID_WORK
from faults.helpers import pick_worker, process_alive, wait_until
from faults.interface import Fault, FaultContext


class SigTerm(Fault):
    name = "sigterm"
    touches_publish = False   # ends a worker process; no link
    effect = DIED_MID_WORK
    description = "SIGTERM a worker with a grace period, then SIGKILL it if it is still alive"
    params = (
        Param("role", "consumer", "the role of the worker"),
        Param("target", "", "its process name (empty: drawn from the run's seed)"),
        Param("at_ms", 500, "when SIGTERM is sent"),
        Param("grace_ms", 500, "how long it may take to finish its batch and exit"),
    )

    def run(self, ctx: FaultContext) -> None:
        ctx.sleep(self.at_ms)
        worker = pick_worker(ctx, self.role, self.target)
        sent = time.monotonic()
        worker.kill(signal.SIGTERM)
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid)
        graceful = wait_until(lambda: not process_alive(worker.pid), ctx.scale(self.grace_ms))
        if not graceful:
            worker.kill(signal.SIGKILL)
        ctx.record("stop", name=self.name, worker=worker.name, graceful=graceful,
                   exit_s=round(time.monotonic() - sent, 4))
