"""kill-consumer: SIGKILL a consumer mid-batch, a real crash.

By time (``at=time``: from outside, ``at_ms`` into the workload, as the reference's
kill at 1.2 s into a 500-entry batch), by what the consumer holds (``at=holding``: from
outside, the first moment the victim is seen holding entries it read) or by failpoint
(``at=mid_batch,after=250``: the worker SIGKILLs itself after 250 entries of a batch;
``after_apply_before_ack``: after the DB write, before XACK). What was delivered but not
done is then recoverable from the PEL with ack-after, and gone with ack-on-receive.

Why ``at=holding`` reads the consumer group, not the effects or the clock: a kill at a time
can land between a batch's last write and the next read, where an ack-first consumer holds
nothing and loses nothing (beside two CPU hogs, ``at_ms=300`` missed that way now and then);
publishes (``after_entries``) say nothing of where a consumer is in its batches. The group
is what every consumer shows alike, the framework's and a black-box one (the effect table
says what was done, not by whom, and an ack-first consumer's PEL is empty while it works):

* the group has entries it has not handed out (XINFO GROUPS lag > 0), so no reader of it
  is blocked in XREADGROUP (Redis serves a blocked reader as the entry arrives);
* the victim last read at least ``held_ms`` ago (XINFO CONSUMERS idle: since its last read or
  claim, on Redis 7.0 the last one that handed it entries; XACK leaves it be), and with
  entries waiting a read hands some out: it has not come back for more, it is working
  through what it got, acked or not (an ack-first consumer acks right after the read,
  well within ``held_ms``);
* checked again with the victim stopped (SIGSTOP), then SIGKILL: the moment cannot slip
  between the look and the kill (a read since the stop would show as a younger idle).

So an ack-first victim dies with acked, unwritten entries in hand (lost in every run) and
an ack-after one with its work in the PEL (recovered). A consumer that never holds work
while a backlog waits (it keeps up) gives no such moment: after ``wait_ms`` the fault
fails and the run is unknown, not judged on a kill that could not lose anything.
"""
from __future__ import annotations

import signal
import time

from chaos.errors import BadArguments
from chaos.params import Param
from chaos.workload.procutil import process_stopped
from faults.helpers import GroupView, group_view, pick_worker, process_alive, wait_for_entries, wait_until
from faults.effects import DIED_MID_WORK
from faults.interface import Fault, FaultContext, FaultError

POLL_S = 0.005   # at=holding: how often the group is read
KILL_POINTS = ("time", "holding", "after_read", "mid_batch", "before_apply", "after_apply_before_ack")


class KillConsumer(Fault):
    name = "kill-consumer"
    description = ("SIGKILL a consumer mid-batch, at a time, once it holds entries it read, or at a failpoint "
                   "(after k entries of a batch)")
    effect = DIED_MID_WORK
    params = (
        Param("at", "time", "time (from outside, at at_ms), holding (from outside, once the victim holds "
              "entries it read: see held_ms) or the failpoint where the worker kills itself", choices=KILL_POINTS),
        Param("after_entries", 1, "for at=time: wait until the workload's streams hold this many "
              "entries first (1: the clock starts at the first publish)", kind=int, minimum=0),
        Param("at_ms", 1200, "for at=time: then wait this long before the SIGKILL"),
        Param("delivered", 1, "for at=holding: wait until the workload's groups have handed out this many "
              "entries first (XINFO GROUPS entries-read)", kind=int, minimum=0),
        Param("held_ms", 50, "for at=holding: the victim last read at least this long ago while entries "
              "wait in its group (it has not come back for more)"),
        Param("after", 250, "for a failpoint: fire after this many entries reached it", kind=int, minimum=0),
        Param("role", "consumer", "the role whose worker is killed"),
        Param("target", "", "the process name to kill (empty: one drawn from the run's seed; "
              "a failpoint needs a name, default C1)"),
        Param("wait_ms", 30000, "how long to wait for the failpoint, for after_entries or for the victim to "
              "hold work (unscaled)"),
    )

    def validate(self) -> None:
        timed, held = {"after_entries", "at_ms"} & set(self.given), {"delivered", "held_ms"} & set(self.given)
        if self.at == "holding" and (timed or "after" in self.given):
            raise BadArguments(f"fault 'kill-consumer': at=holding kills when the victim holds work, not at "
                               f"a time or a failpoint's count; drop {', '.join(sorted(timed or {'after'}))} "
                               f"(it waits with delivered= and held_ms=)")
        if self.at != "holding" and held:
            raise BadArguments(f"fault 'kill-consumer': {', '.join(sorted(held))} applies to at=holding")
        if self.at not in ("time", "holding") and "after_entries" in self.given:
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
        if self.at in ("time", "holding"):
            return {}
        return {self.victim: {self.at: {"action": "kill", "after": self.after, "count": 1}}}

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.killed: list[str] = []

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        if self.at == "holding":
            self._kill_holding(ctx)
            return
        if self.at == "time":
            after_entries = self.values.get("after_entries", 0)   # (kill-dispatcher has none)
            if after_entries:
                wait_for_entries(ctx, after_entries, self.wait_ms / 1000, self.name)
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

    def holds(self, view: GroupView | None, held_s: float) -> bool:
        """The victim holds entries it read (module docstring), as far as `view` shows."""
        return (view is not None and view.delivered >= self.delivered and view.undelivered > 0
                and view.idle_ms is not None and view.idle_ms >= held_s * 1000)

    def _kill_holding(self, ctx: FaultContext) -> None:
        """Look every POLL_S; when the victim holds work, stop it, look again, SIGKILL (or SIGCONT)."""
        redis, held_s = ctx.cluster.direct_redis("primary"), ctx.scale(self.held_ms)
        worker = pick_worker(ctx, self.role, self.target)
        started = time.monotonic()
        deadline, looks = started + self.wait_ms / 1000, 0
        while time.monotonic() < deadline and not ctx.stop_event.is_set() and worker.alive():
            if self.holds(group_view(redis, worker.name), held_s):
                looks += 1
                worker.kill(signal.SIGSTOP)
                stopped = time.monotonic()
                try:
                    wait_until(lambda: process_stopped(worker.pid) or not worker.alive(), 1.0)
                    view = group_view(redis, worker.name)
                    since_stop_ms = (time.monotonic() - stopped) * 1000
                    if self.holds(view, held_s) and view.idle_ms >= since_stop_ms:
                        worker.kill(signal.SIGKILL)
                        self.killed.append(worker.name)
                        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                                   signal="SIGKILL", holding={"idle_ms": view.idle_ms, "pending": view.pending,
                                                              "undelivered": view.undelivered,
                                                              "delivered": view.delivered},
                                   looks=looks, waited_s=round(stopped - started, 3))
                        return
                finally:
                    if not self.killed:
                        worker.kill(signal.SIGCONT)
            time.sleep(POLL_S)
        if ctx.stop_event.is_set():
            return
        if not worker.alive():
            raise FaultError(f"fault {self.name!r}: {worker.name} died before it was seen holding work")
        raise FaultError(f"fault {self.name!r}: {worker.name} was never seen holding work (its last entries "
                         f"got >= {self.held_ms} ms before, with entries waiting in its group) in "
                         f"{time.monotonic() - started:.0f} s; the workload needs a backlog, or lower held_ms")
