"""xautoclaim: a consumer stalls with entries in its PEL; another claims them.

The stalled consumer stops (SIGSTOP at its failpoint, or from outside at a time) for
longer than the group's min-idle-time; a live consumer's XAUTOCLAIM takes its pending
entries and applies them; then the stalled one resumes and writes late. With a plain
UPDATE that late write is a stale overwrite; with CAS (s5) it matches 0 rows.

With a role-wide failpoint (no ``target``) whichever consumer first reaches it stalls;
later hits (the claimer reaching the same failpoint with the claimed entry) are resumed
at once, so only one consumer stalls.

With ``until_etype`` the stall also lasts until another consumer has committed an event of
that type (its ``after_commit`` failpoint, resumed at once): the stalled consumer's late
write then lands after that commit, forced rather than hoped for. A wall-clock stall alone
let a loaded machine publish or apply that event only after the stalled write.

With ``until_claimed=1`` (a failpoint stall only) it also lasts until another consumer has
reached the stall failpoint with the entry (the claimed copy, resumed at once): the claim the
fault exists for then happens inside its window every run, however late a loaded machine
lets the claimer's XAUTOCLAIM run. A wall-clock stall alone let the claim fall after the
resume (the run is then `unknown`: the effect claimed-while-running is missing).

With ``late_write=1`` (a failpoint stall only) the fault also waits, after the resume, for the
stalled consumer's own apply of the entry (its ``after_apply_before_ack`` failpoint). So that the
workload cannot end first (it ends when every entry is acked: the claimer's ack of the claimed
copy, or paid's, would end it while the stalled consumer had yet to write, and a loaded run
stopped before that write once), another consumer that reaches ``after_apply_before_ack`` with
the stalled event, or ``after_commit`` with ``until_etype``, once every ``until`` condition
holds, stays stopped there until that write came. It waits only for the stalled consumer, who
needs nothing from it. A run where the late write never came within ``wait_ms`` is `unknown`.
"""
from __future__ import annotations

import signal
import threading
import time

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import CLAIMED_WHILE_RUNNING
from faults.helpers import arrivals, heal_stopped, pick_worker, process_alive
from faults.interface import Fault, FaultContext, FaultError

STALL_POINTS = ("time", "after_read", "before_apply", "before_lock", "after_apply_before_ack")
LATE_POINT = "after_apply_before_ack"   # where late_write sees the stalled consumer's own apply


class XAutoClaim(Fault):
    name = "xautoclaim"
    touches_publish = False   # stalls a consumer
    effect = CLAIMED_WHILE_RUNNING   # another consumer claimed what the stalled one held, during the stall
    description = "stall a consumer holding pending entries past min-idle-time so another XAUTOCLAIMs them"
    params = (
        Param("at", "before_apply", "the failpoint where the consumer stops itself, or time (SIGSTOP from "
              "outside at at_ms)", choices=STALL_POINTS),
        Param("at_ms", 100, "for at=time: when the SIGSTOP is sent"),
        Param("stall_ms", 1500, "how long it stays stopped (longer than the group's min-idle-time)"),
        Param("target", "", "the consumer process that stalls (empty: whichever consumer of the role "
              "reaches the failpoint first; for at=time one drawn from the run's seed)"),
        Param("role", "consumer", "its role"),
        Param("etype", "", "stall only on an event of this type (e.g. created); empty: the first event"),
        Param("until_etype", "", "also stay stopped until another consumer has committed an event of this "
              "type (e.g. paid; failpoint after_commit), so the late write lands after it"),
        Param("until_claimed", False, "also stay stopped until another consumer has reached the stall "
              "failpoint with the entry (the claimed copy; not for at=time)", kind=bool),
        Param("late_write", False, "after the resume, also wait for the stalled consumer's own apply "
              f"(failpoint {LATE_POINT}), holding another consumer's ack of the event (or of until_etype's) "
              "meanwhile so the workload cannot end first (not for at=time)", kind=bool),
        Param("wait_ms", 30000, "for a failpoint: how long to wait for the worker to reach it (unscaled)"),
    )

    def validate(self) -> None:
        for flag in ("until_claimed", "late_write"):
            if getattr(self, flag) and self.at == "time":
                raise BadArguments(f"fault 'xautoclaim': {flag} needs a failpoint stall (the other consumers are "
                                   f"seen at failpoints); drop {flag} or use at=before_apply")
        if self.late_write and self.at in (LATE_POINT, "after_read"):
            raise BadArguments(f"fault 'xautoclaim': late_write waits for the stalled consumer's apply at "
                               f"{LATE_POINT}, so it must stall before the apply: use at=before_apply")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        out: dict[str, dict[str, dict]] = {}
        if self.at != "time":
            point: dict = {"action": "signal", "count": 1}
            if self.etype:
                point["etype"] = self.etype
            out[self.target or self.role] = {self.at: point}
        if self.until_etype:
            out.setdefault(self.role, {})["after_commit"] = {"action": "signal", "count": 1,
                                                            "etype": self.until_etype}
        if self.late_write:
            point = {"action": "signal", "count": 1}
            if self.etype:
                point["etype"] = self.etype
            out.setdefault(self.role, {})[LATE_POINT] = point
        return out

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.stopped = None
        self.done = threading.Event()
        self.passed: list[str] = []
        self.committed = threading.Event()   # until_etype's commit seen
        self.late = threading.Event()        # late_write: the stalled consumer's own apply seen
        self.stalled_name: str | None = None
        self.held: list = []                 # late_write: others held until then
        self.held_at: list[str] = []         # ... and where (for the stop op)
        self.lock = threading.Lock()
        if self.until_etype:
            self._watch(ctx, "after_commit")
        if self.late_write:
            self._watch(ctx, LATE_POINT)

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        if self.at == "time":
            ctx.sleep(self.at_ms)
            worker = pick_worker(ctx, self.role, self.target)
            worker.kill(signal.SIGSTOP)
            info: dict = {}
        else:
            worker, info = ctx.wait_failpoint(self.at, self.wait_ms)
            self._watch(ctx, self.at)
        self.stopped = worker
        self.stalled_name = worker.name
        stopped_at = time.monotonic()
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                   failpoint=self.at, **({"entry_id": info.get("entry_id")} if info.get("entry_id") else {}))
        ctx.sleep(self.stall_ms)
        deadline = stopped_at + self.wait_ms / 1000
        waited = self._wait_conditions(ctx, deadline)
        self._resume(ctx)
        if self.late_write:
            waited["late_write"] = self._wait_late(ctx, deadline)
            waited["held"] = list(self.held_at)
        ctx.record("stop", name=self.name, worker=worker.name, stalled_s=round(time.monotonic() - stopped_at, 4),
                   passed_through=list(self.passed), **waited)
        missed = [what for what, met in waited.items() if met is False]
        if missed:
            raise FaultError(f"fault 'xautoclaim': {', '.join(missed)} did not happen within {self.wait_ms} ms of "
                             f"the stall: the race it forces did not happen")

    def _wait_conditions(self, ctx: FaultContext, deadline: float) -> dict[str, bool]:
        """Stay stopped until each condition asked for holds (or the deadline): `paid` committed
        by another consumer (until_etype), the entry claimed and brought to the failpoint by
        another (until_claimed). Returns each condition and whether it held."""
        conditions = self._conditions()
        while (not all(met() for met in conditions.values()) and time.monotonic() < deadline
               and not ctx.stop_event.is_set()):
            time.sleep(0.01)
        return {what: met() for what, met in conditions.items()}

    def _conditions(self) -> dict:
        conditions = {}
        if self.until_etype:
            conditions["committed_" + self.until_etype] = self.committed.is_set
        if self.until_claimed:
            conditions["claimed"] = lambda: bool(self.passed)
        return conditions

    def _wait_late(self, ctx: FaultContext, deadline: float) -> bool:
        """Until the resumed consumer's own apply was seen (late_write; or the deadline); then
        release whoever was held meanwhile. Whether the apply was seen."""
        while not self.late.is_set() and time.monotonic() < deadline and not ctx.stop_event.is_set():
            time.sleep(0.01)
        self._release(ctx)
        return self.late.is_set()

    def _watch(self, ctx: FaultContext, point: str) -> None:
        threading.Thread(target=self._pass_through, args=(ctx, point, self.done), daemon=True,
                         name=f"xautoclaim-{point}").start()

    def _pass_through(self, ctx: FaultContext, point: str, done: threading.Event) -> None:
        """Each other consumer that reaches `point` (the claimer at the stall failpoint, paid's
        committer at after_commit, an apply at LATE_POINT): noted, and resumed at once, or held
        (late_write). Ends with this run (`done`: a later run's arm makes a new one)."""
        for other in arrivals(ctx, point, done):
            self._arrived(ctx, point, other)

    def _arrived(self, ctx: FaultContext, point: str, other) -> None:
        with self.lock:
            if point == self.at:
                self.passed.append(other.name)
            elif point == "after_commit":
                self.committed.set()
            if point == LATE_POINT and other.name == getattr(self, "stalled_name", None):
                self.late.set()
            elif (point != self.at and self.late_write and not self.late.is_set() and not self.done.is_set()
                  and all(met() for met in self._conditions().values())):
                self.held.append(other)   # the stalled one resumes now: its write must come before this ack
                self.held_at.append(f"{other.name}@{point}")
                return
        ctx.resume(other)

    def _release(self, ctx: FaultContext) -> None:
        with self.lock:
            held, self.held = self.held, []
        for worker in held:
            if process_alive(worker.pid):
                ctx.resume(worker)

    def _resume(self, ctx: FaultContext) -> None:
        worker, self.stopped = self.stopped, None
        if worker is None or not process_alive(worker.pid):
            return
        if self.at == "time":
            worker.kill(signal.SIGCONT)
        else:
            ctx.resume(worker)

    def heal(self, ctx: FaultContext) -> None:
        heal_stopped(self, ctx, lambda: self._resume(ctx), lambda: self._release(ctx))
