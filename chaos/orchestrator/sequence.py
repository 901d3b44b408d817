"""The order of one run's phases, the one sequence of both runners: reset, arm, workload,
(the faults acting from the arm on) heal, drain, stop, check.

`run_phases(steps)` holds the order; a `Steps` object says how its runner starts the workers
and observes the effects: the orchestrator's `Orchestrated` below (worker processes of its own,
the history they write), the black box's `chaos.blackbox.session._Run` (the team's command, the
triggers' effects). An error before the heal that the steps recognise (`aborted`: a rig failure,
a run that could not start) ends those phases at once; the faults are then healed as
`faultthreads.acting` says; the stop always happens; the drain runs only when the steps find it
`drainable`; the check always gives the steps' result.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from chaos.orchestrator import check as checking
from chaos.orchestrator import phases
from chaos.orchestrator.drain import drain, drainable
from chaos.orchestrator.faultthreads import FaultSchedule, acting, heal_bound_s
from chaos.orchestrator.livefold import FoldingWatch
from chaos.orchestrator.priority import AHEAD_EVENTS
from chaos.orchestrator.rigwatch import RIG_ERRORS
from chaos.orchestrator.run import Run
from chaos.orchestrator.workers import RunAborted
from chaos.results import RunMetrics, RunResult
from chaos.workload import planfile
from chaos.workload.final_state import INTENDED_FILE, Intended, map_large_blocks

R = TypeVar("R", covariant=True)


class Steps(Protocol[R]):
    """What one runner does in each phase (the order is `run_phases`'s)."""

    schedule: FaultSchedule       # the run's faults; the arm starts them at its moment
    run_course: bool              # the faults run their course after the workload (else stopped when it ends)
    report_cut: bool              # a fault's failure counts when the run was cut short

    def phase(self, name: str) -> AbstractContextManager[Any]: ...
    def stop_event(self) -> Any: ...
    def heal_bound_s(self) -> float: ...
    def cut_bound_s(self) -> float: ...
    def aborted(self, exc: Exception, where: str) -> bool: ...   # recorded (True), or not the run's (raised)
    def reset(self) -> None: ...
    def arm(self) -> None: ...
    def workload(self) -> None: ...
    def drainable(self) -> bool: ...
    def drain(self) -> None: ...
    def stop(self) -> None: ...
    def check(self) -> R: ...


def run_phases(steps: Steps[R]) -> R:
    """Every phase of one run, in order; the steps' result."""
    try:
        _until_heal(steps)
        if steps.drainable():
            with steps.phase("drain"):
                _guarded(steps, steps.drain, "drain")
    finally:
        with steps.phase("stop"):
            steps.stop()
    with steps.phase("check"):
        return steps.check()


def _until_heal(steps: Steps[Any]) -> None:
    """Reset, arm and workload with the faults acting; whatever ends them, the faults are healed."""
    with acting(steps.schedule, steps.stop_event(), steps.heal_bound_s, run_course=steps.run_course,
                cut_bound_s=steps.cut_bound_s, report_cut=steps.report_cut, healing=lambda: steps.phase("heal")):
        if not _guarded(steps, lambda: _before_heal(steps), "workload"):
            steps.schedule.cut = True


def _before_heal(steps: Steps[Any]) -> None:
    with steps.phase("reset"):
        steps.reset()
    with steps.phase("arm"):
        steps.arm()
    with steps.phase("workload"):
        steps.workload()


def _guarded(steps: Steps[Any], body: Callable[[], None], where: str) -> bool:
    """Run `body`; an error the steps recognise is recorded (False), any other raised."""
    try:
        body()
    except Exception as exc:
        if not steps.aborted(exc, where):
            raise
        return False
    return True


class Orchestrated:
    """The orchestrator's steps: its own worker processes (fork server), effects read from the
    history they write and the final state (phases.py, drain.py, check.py)."""

    run_course = False     # the faults stop when the workload ends
    report_cut = True      # a fault that failed on a broken rig is still a reason

    def __init__(self, run: Run) -> None:
        self.run = run
        self.events, self.producer_plans = run.workload or phases.plan_workload(run.cell.strategy, run.seed)
        run.workload = None
        self.planned = phases.Planned(self.events)   # (what the bounds need: the events go after the reset)
        self.large = self.planned.count >= AHEAD_EVENTS   # (its fold ahead: chaos.orchestrator.priority)
        if self.large:
            map_large_blocks()   # (the checker's records of 10^6 events grow by copies: chaos.workload.final_state)
        self.intended: Intended | None = None
        self.faults = run.cell.new_faults()
        run.workers.fault_failpoints = [f.failpoints() for f in self.faults]
        self.schedule = phases.fault_schedule(run)
        self.history: Any = None
        self.notes: Any = None

    def phase(self, name: str) -> AbstractContextManager[Any]:
        return self.run.phase(name)

    def stop_event(self) -> Any:
        return self.run.stop_event

    def heal_bound_s(self) -> float:
        return heal_bound_s(self.run.cell.time_scale, self.run.rig.failed.is_set())

    cut_bound_s = heal_bound_s    # (the orchestrator heals a cut run as any other)

    def aborted(self, exc: Exception, where: str) -> bool:
        run = self.run
        if isinstance(exc, RunAborted) and where == "workload":
            run.reasons.append(str(exc))
        elif isinstance(exc, RIG_ERRORS):
            run.rig_error(exc, where)
        elif isinstance(exc, OSError):
            run.disk_full_or_raise(exc)
        else:
            return False
        return True

    def reset(self) -> None:
        phases.reset(self.run, self.events)

    def spill(self) -> Intended:
        """The intended events written to the run dir, the planned ones dropped (once): from the
        arm on, nothing but the check needs them (10^6 events: ~240 MB through the workload)."""
        if self.intended is None:
            self.intended = Intended.spill(self.events, self.run.dir / INTENDED_FILE)
            self.events = []
        return self.intended

    def spill_plans(self) -> None:
        """Each producer plan's rows written to the run dir as they are made, its spec naming the
        file instead (chaos/workload/planfile.py): the producer, and a respawned one, reads them
        from there (10^6 events: no ~140 MB list of rows in the orchestrator, at the arm or after)."""
        for plan in self.producer_plans:
            plan.spec = planfile.spill(plan.spec, self.run.dir / f"{plan.name}{planfile.SUFFIX}")

    def drop_plans(self) -> None:
        """The producers' rows and their files gone (the workers are stopped, or never started)."""
        for plan in self.producer_plans:
            planfile.remove(plan.spec)
            if "events" in plan.spec:
                plan.spec = {**plan.spec, "events": []}

    def arm(self) -> None:
        run = self.run
        self.spill_plans()   # (first: a plan's rows are made from the events that spill() drops)
        self.spill()   # (after the reset, which seeded each event's key)
        run.rig.start()       # after the reset: a reset restarts servers on purpose
        run.rig.check(deep=True)
        run.raise_if_rig_failed()
        phases.arm(run, self.producer_plans, self.faults, self.schedule)

    def workload(self) -> None:
        # (it folds the history for the check as it tails it: chaos/orchestrator/livefold.py)
        self.run.progress = FoldingWatch(self.run.dir, run=self.run.index, threaded=True,
                                         ahead=self.large)
        phases.workload(self.run, self.planned)

    def drainable(self) -> bool:
        return drainable(self.run)

    def drain(self) -> None:
        drain(self.run, self.planned)

    def stop(self) -> None:
        self.run.workers.stop_all(self.run.t0)

    def check(self) -> RunResult:
        # (the workers are stopped: the watch's per-entry state and the producers' plan rows
        # (inline when the run ended before its arm) are not needed by the check: freed before it)
        if self.run.progress is not None:
            self.run.progress.shed()
        self.drop_plans()
        # the intended events are read back from their file (spilled at the arm, or now: a run
        # that ended before its arm), the planned ones dropped
        intended = self.spill()
        try:
            result, self.history, self.notes = checking.check(self.run, intended, self.faults)
        finally:
            intended.remove()
        return result


def execute(run: Run) -> tuple[RunResult, RunMetrics]:
    """Every phase of `run`, in order; its result and metrics."""
    steps = None
    try:
        started = time.monotonic()
        run.open_histories()
        steps = Orchestrated(run)
        run.t0 = time.monotonic()
        result = run_phases(steps)
        metrics = checking.measure(run, steps.history, steps.notes, started)
        checking.trace(run, result, steps.history)
        return result, metrics
    finally:
        if run.progress is not None:
            run.progress.release()   # (history() did, unless the run ended before it)
        if steps is not None:
            steps.drop_plans()   # (the check did, unless the run ended before it)
            if steps.intended is not None:
                steps.intended.remove()   # (likewise)
