"""kill-dispatcher: SIGKILL an outbox dispatcher, between its XADD and the mark, or by time.

At ``at=after_xadd_before_mark`` every targeted dispatcher carries the failpoint with
action ``signal``: the first one to reach it (after ``after`` rows, among the rows the
selectors let through) stops itself right after Redis accepted the entry and before the
row is marked published, and the fault SIGKILLs it there. Later arrivals are resumed,
so exactly one dispatcher dies per run whichever of N relays the row. The next dispatcher
(a parallel one, or the respawned one) sends the row again: the stream holds the event
twice and only the consumer's inbox keeps the effect single. The relay's locks (row lock
or per-key advisory lock) die with its connection. ``at=time`` kills from outside at ``at_ms``.
"""
from __future__ import annotations

import signal

from chaos.errors import BadArguments
from chaos.workload.procutil import process_stopped
from chaos.params import Param
from faults.helpers import wait_until
from faults.interface import FaultContext, FaultError
from faults.kill_consumer import KillConsumer

KILL_POINTS = ("time", "after_xadd_before_mark")
SELECTORS = ("etype", "key", "event_id")
FOLLOW_UP_MS = 100  # how long each wait for a later arrival at the failpoint lasts


class KillDispatcher(KillConsumer):
    """kill-consumer's parameters and its kill by time, aimed at the `dispatcher` role;
    at the failpoint the kill comes from outside, once, so N dispatchers lose exactly one."""

    name = "kill-dispatcher"
    touches_publish = False   # kills a dispatcher process; its link is untouched
    description = "SIGKILL an outbox dispatcher between XADD and marking the row published, or by time"
    params = (
        Param("at", "after_xadd_before_mark", "the failpoint where the dispatcher is killed, or time "
              "(from outside, at at_ms)", choices=KILL_POINTS),
        Param("at_ms", 200, "for at=time: when the SIGKILL is sent, from the start of the workload"),
        Param("after", 0, "for the failpoint: rows each dispatcher lets pass it first", kind=int, minimum=0),
        Param("etype", "", "for the failpoint: only rows of this event type reach it (empty: any)"),
        Param("key", "", "for the failpoint: only rows of this key reach it (empty: any)"),
        Param("event_id", "", "for the failpoint: only this event's row reaches it (empty: any)"),
        Param("role", "dispatcher", "the role whose worker is killed"),
        Param("target", "", "one dispatcher by name (empty: at the failpoint every dispatcher of the "
              "role, the first to arrive dies; at=time one drawn from the run's seed)"),
        Param("wait_ms", 30000, "for the failpoint: how long to wait for a dispatcher to reach it (unscaled)"),
    )

    def validate(self) -> None:
        given_selectors = [s for s in (*SELECTORS, "after") if s in self.given]
        if self.at == "time" and given_selectors:
            raise BadArguments(f"fault 'kill-dispatcher': {', '.join(given_selectors)} select rows at the "
                               "failpoint; with at=time give at_ms= instead (or at=after_xadd_before_mark)")

    @property
    def victim(self) -> str:
        return self.target or self.role

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at == "time":
            return {}
        point = {"action": "signal", "after": self.after, "count": 1}
        point.update({s: getattr(self, s) for s in SELECTORS if getattr(self, s)})
        return {self.victim: {self.at: point}}

    def run(self, ctx: FaultContext) -> None:
        """Kill the first arrival at the failpoint, then resume later ones until the workload ends."""
        if self.at == "time":
            super().run(ctx)
            return
        self.killed = []
        try:
            # wait_ms is unscaled and wait_failpoint scales what it gets: hand it wait_ms / scale
            worker, info = ctx.wait_failpoint(self.at, self.wait_ms / max(ctx.scale(1000), 1e-9))
        except FaultError:
            ctx.record("info", name=self.name, spec=self.spec, failpoint=self.at, fired=False)
            return
        worker.kill(signal.SIGKILL)
        self.killed.append(worker.name)
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                   failpoint=self.at, event_id=info.get("event_id"), entry_id=info.get("entry_id"), fired=True)
        while not ctx.stop_event.is_set():
            try:
                later, _ = ctx.wait_failpoint(self.at, FOLLOW_UP_MS)
            except FaultError:
                continue
            # The failpoint writes its marker *before* it SIGSTOPs itself: a SIGCONT sent in
            # between is lost and the dispatcher stays stopped for good (seen under load).
            wait_until(lambda: process_stopped(later.pid) or not later.alive(), 5.0)
            ctx.resume(later)
            ctx.record("info", name=self.name, resumed=later.name)

