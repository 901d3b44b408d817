"""kill-consumer: SIGKILL a consumer mid-batch, a real crash.

By time (``at=time``: from outside, ``at_ms`` into the workload, as the reference's
kill at 1.2 s into a 500-entry batch) or by failpoint (``at=mid_batch,after=250``: the
worker SIGKILLs itself after 250 entries of a batch; ``after_apply_before_ack``: after
the DB write, before XACK). What was delivered but not done is then recoverable from
the PEL with ack-after, and gone with ack-on-receive.
"""
from __future__ import annotations

import signal
import time

from chaos.errors import BadArguments
from chaos.params import Param
from faults.helpers import pick_worker, process_alive, wait_for_entries, wait_until
from faults.effects import DIED_MID_WORK
from faults.interface import Fault, FaultContext

KILL_POINTS = ("time", "after_read", "mid_batch", "before_apply", "after_apply_before_ack")


class KillConsumer(Fault):
    name = "kill-consumer"
    description = "SIGKILL a consumer mid-batch, at a time or at a failpoint (after k entries of a batch)"
    effect = DIED_MID_WORK
    params = (
        Param("at", "time", "time (from outside, at at_ms) or the failpoint where the worker kills itself",
              choices=KILL_POINTS),
        Param("after_entries", 1, "for at=time: wait until the workload's streams hold this many "
              "entries first (1: the clock starts at the first publish)", kind=int, minimum=0),
        Param("at_ms", 1200, "for at=time: then wait this long before the SIGKILL"),
        Param("after", 250, "for a failpoint: fire after this many entries reached it", kind=int, minimum=0),
        Param("role", "consumer", "the role whose worker is killed"),
        Param("target", "", "the process name to kill (empty: one drawn from the run's seed; "
              "a failpoint needs a name, default C1)"),
        Param("wait_ms", 30000, "how long to wait for the failpoint or for after_entries (unscaled)"),
    )

    def validate(self) -> None:
        if self.at != "time" and "after_entries" in self.given:
            raise BadArguments("fault 'kill-consumer': after_entries applies to at=time; a failpoint "
                               "counts with after= instead")
        if self.at == "time" and "after" in self.given:
            raise BadArguments("fault 'kill-consumer': after= counts entries at a failpoint; "
                               "with at=time give at_ms= instead (or at=mid_batch,after=250)")

    def explains(self) -> frozenset[str]:
        """A killed producer leaves the rest of its schedule unattempted."""
        producer = self.role == "producer" or self.target.startswith("P")
        return frozenset({"unattempted"}) if producer else frozenset()

    @property
    def victim(self) -> str:
        return self.target or "C1"

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at == "time":
            return {}
        return {self.victim: {self.at: {"action": "kill", "after": self.after, "count": 1}}}

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.killed: list[str] = []

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        if self.at == "time":
            if self.after_entries:
                wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name)
            ctx.sleep(self.at_ms)
            worker = pick_worker(ctx, self.role, self.target)
            worker.kill(signal.SIGKILL)
            self.killed.append(worker.name)
            ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                       signal="SIGKILL")
            return
        # The worker kills itself at the failpoint; record when it is gone.
        worker = pick_worker(ctx, self.role, self.victim)
        deadline = time.monotonic() + self.wait_ms / 1000
        gone = wait_until(lambda: not process_alive(worker.pid) or ctx.stop_event.is_set(),
                          max(0.0, deadline - time.monotonic()))
        dead = gone and not process_alive(worker.pid)
        if dead:
            self.killed.append(worker.name)
        ctx.record("start" if dead else "info", name=self.name, spec=self.spec, worker=worker.name,
                   pid=worker.pid, failpoint=self.at, fired=dead)

    def heal(self, ctx: FaultContext) -> None:
        """A SIGKILL is not undone: recovery is the surviving consumers' XAUTOCLAIM in the drain."""
