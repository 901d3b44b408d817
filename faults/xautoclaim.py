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
"""
from __future__ import annotations

import signal
import threading
import time

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import CLAIMED_WHILE_RUNNING
from faults.helpers import pick_worker, process_alive
from faults.interface import Fault, FaultContext, FaultError

STALL_POINTS = ("time", "after_read", "before_apply", "before_lock", "after_apply_before_ack")


class XAutoClaim(Fault):
    name = "xautoclaim"
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
        Param("wait_ms", 30000, "for a failpoint: how long to wait for the worker to reach it (unscaled)"),
    )

    def validate(self) -> None:
        if self.until_claimed and self.at == "time":
            raise BadArguments("fault 'xautoclaim': until_claimed needs a failpoint stall (the claimer is seen at "
                             "the same failpoint); drop until_claimed or use at=before_apply")

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
        return out

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.stopped = None
        self.done = threading.Event()
        self.passed: list[str] = []
        self.committed = threading.Event()   # until_etype's commit seen
        if self.until_etype:
            self._watch(ctx, "after_commit", self.committed)

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
            self._watch(ctx, self.at, None)
        self.stopped = worker
        stopped_at = time.monotonic()
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                   failpoint=self.at, **({"entry_id": info.get("entry_id")} if info.get("entry_id") else {}))
        ctx.sleep(self.stall_ms)
        waited = self._wait_conditions(ctx, stopped_at + self.wait_ms / 1000)
        self._resume(ctx)
        ctx.record("stop", name=self.name, worker=worker.name, stalled_s=round(time.monotonic() - stopped_at, 4),
                   passed_through=list(self.passed), **waited)
        missed = [what for what, met in waited.items() if not met]
        if missed:
            raise FaultError(f"fault 'xautoclaim': {', '.join(missed)} did not happen within {self.wait_ms} ms of "
                             f"the stall: the race it forces did not happen")

    def _wait_conditions(self, ctx: FaultContext, deadline: float) -> dict[str, bool]:
        """Stay stopped until each condition asked for holds (or the deadline): `paid` committed
        by another consumer (until_etype), the entry claimed and brought to the failpoint by
        another (until_claimed). Returns each condition and whether it held."""
        conditions = {}
        if self.until_etype:
            conditions["committed_" + self.until_etype] = self.committed.is_set
        if self.until_claimed:
            conditions["claimed"] = lambda: bool(self.passed)
        while (not all(met() for met in conditions.values()) and time.monotonic() < deadline
               and not ctx.stop_event.is_set()):
            time.sleep(0.01)
        return {what: met() for what, met in conditions.items()}

    def _watch(self, ctx: FaultContext, point: str, seen: threading.Event | None) -> None:
        threading.Thread(target=self._pass_through, args=(ctx, point, seen, self.done), daemon=True,
                         name=f"xautoclaim-{point}").start()

    def _pass_through(self, ctx: FaultContext, point: str, seen: threading.Event | None,
                      done: threading.Event) -> None:
        """Resume at once any other consumer that reaches `point` (the claimer); set `seen`.
        Ends with this run (`done`: a later run's arm makes a new one)."""
        while not done.is_set() and not ctx.stop_event.is_set():
            try:
                other, _ = ctx.wait_failpoint(point, 200)
            except Exception:  # noqa: BLE001 - a timeout: look again
                time.sleep(0.01)
                continue
            if seen is None:
                self.passed.append(other.name)
            else:
                seen.set()
            ctx.resume(other)

    def _resume(self, ctx: FaultContext) -> None:
        worker, self.stopped = self.stopped, None
        if worker is None or not process_alive(worker.pid):
            return
        if self.at == "time":
            worker.kill(signal.SIGCONT)
        else:
            ctx.resume(worker)

    def heal(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            return
        self.done.set()
        try:
            self._resume(ctx)
        except Exception as exc:  # noqa: BLE001
            raise FaultError(f"fault 'xautoclaim' could not resume the stalled consumer: {exc}") from exc
