"""The one base of every fault context: the run's time scale, a sleep that tells whether
the run is stopping, and a resume that cannot lose its SIGCONT.

The orchestrator's RunContext (chaos/orchestrator/faultcontext.py) and the stand-alone LocalContext (faults/local.py,
used by the black-box runner and the fault tests) both derive from it, so a fault behaves
the same under each.
"""
from __future__ import annotations

import signal
import threading
import time

from chaos.workload.procutil import process_stopped
from faults.interface import WorkerHandle

RESUME_WAIT_S = 5.0   # how long resume waits for the worker's own SIGSTOP to land


class FaultContextBase:
    """`scale`, `sleep` and `resume` of the FaultContext protocol; subclasses set
    `time_scale` and `stop_event` and add the rest (`cluster`, `rng`, `workers`, ...)."""

    time_scale: float = 1.0
    stop_event: threading.Event

    def scale(self, ms: float) -> float:
        """Milliseconds of the fault's parameters -> seconds of this run (`--time-scale`)."""
        return ms * self.time_scale / 1000.0

    def sleep(self, ms: float) -> bool:
        """Sleep `ms` (scaled); False when the run is stopping meanwhile."""
        time.sleep(self.scale(ms))
        return not self.stop_event.is_set()

    def resume(self, worker: WorkerHandle) -> None:
        """SIGCONT a worker stopped at a `signal` failpoint.

        The worker writes its failpoint marker *before* it SIGSTOPs itself: a SIGCONT sent in
        between is lost and the worker stays stopped for good. So wait until the kernel shows
        it stopped (or it died) first.
        """
        deadline = time.monotonic() + RESUME_WAIT_S
        while time.monotonic() < deadline and worker.alive() and not process_stopped(worker.pid):
            time.sleep(0.001)
        worker.kill(signal.SIGCONT)
