"""The order of one run's phases: reset, arm, workload, heal, drain, stop, check.

A rig failure or a run that could not start ends the phases before the drain at once; the
heal and the stop always happen; the drain runs only on a sound rig when nothing but an
unexpected worker death, or a workload that stalled with its producers done, went wrong
(drain.drainable); the check always gives a RunResult.
"""
from __future__ import annotations

import time
from typing import Any

from chaos.orchestrator import check as checking
from chaos.orchestrator import phases
from chaos.orchestrator.drain import drain, drainable
from chaos.orchestrator.rigwatch import RIG_ERRORS
from chaos.orchestrator.run import Run
from chaos.orchestrator.workers import RunAborted
from chaos.results import RunMetrics, RunResult
from chaos.workload.progress import ProgressWatch


def execute(run: Run) -> tuple[RunResult, RunMetrics]:
    """Every phase of `run`, in order; its result and metrics."""
    try:
        return _execute(run)
    finally:
        if run.progress is not None:
            run.progress.release()   # (history() did, unless the run ended before it)


def _execute(run: Run) -> tuple[RunResult, RunMetrics]:
    started = time.monotonic()
    run.open_histories()
    events, producer_plans = run.workload or phases.plan_workload(run.cell.strategy, run.seed)
    run.workload = None
    faults = run.cell.new_faults()
    run.workers.fault_failpoints = [f.failpoints() for f in faults]
    run.t0 = time.monotonic()
    try:
        _until_heal(run, events, producer_plans, faults)
        if drainable(run):
            with run.phase("drain"):
                try:
                    drain(run, events)
                except RIG_ERRORS as exc:
                    run.rig_error(exc, "drain")
                except OSError as exc:
                    run.disk_full_or_raise(exc)
    finally:
        with run.phase("stop"):
            run.workers.stop_all(run.t0)
    with run.phase("check"):
        result, history, notes = checking.check(run, events, faults)
    metrics = checking.measure(run, history, notes, started)
    checking.trace(run, result, history)
    return result, metrics


def _until_heal(run: Run, events: list, producer_plans: list, faults: list[Any]) -> None:
    """Reset, arm and workload; whatever ends them, the faults are stopped and healed."""
    schedule = phases.fault_schedule(run)
    try:
        with run.phase("reset"):
            phases.reset(run, events)
        run.rig.start()       # after the reset: a reset restarts servers on purpose
        run.rig.check(deep=True)
        run.raise_if_rig_failed()
        with run.phase("arm"):
            phases.arm(run, producer_plans, faults, schedule)
        run.progress = ProgressWatch(run.dir)   # (the check reads the history from its files)
        with run.phase("workload"):
            phases.workload(run, events)
    except RunAborted as exc:
        run.reasons.append(str(exc))
    except RIG_ERRORS as exc:
        run.rig_error(exc, "workload")
    except OSError as exc:
        run.disk_full_or_raise(exc)
    finally:
        run.stop_event.set()
        with run.phase("heal"):
            phases.heal(run, schedule)
