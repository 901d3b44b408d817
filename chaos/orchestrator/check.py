"""The check phase: read the final state, judge the history (chaos.checker), and what a
run measured beside the counts (metrics, the faults' phases, notes, the trace)."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from chaos.checker import check_run
from chaos.events import Event
from chaos.history import read_history
from chaos.orchestrator.drain import leftovers
from chaos.orchestrator.notes import fault_phases, late_fault_notes, work_metrics
from chaos.orchestrator.rigwatch import RIG_ERRORS
from chaos.orchestrator.run import Run
from chaos.results import Counts, FinalState, RunMetrics, RunResult
from chaos.strategies.delivery.base import GROUP
from chaos.workload.final_state import read_final_state
from faults.effects import missing as missing_effect


def check(run: Run, events: list[Event], faults: Sequence[Any] = ()) -> tuple[RunResult, list[dict]]:
    """The run's RunResult and its history (the orchestrator's and nemesis's closed first).
    A fault whose declared effect the history does not show makes the run unknown."""
    try:
        run.rig.check()     # a run shorter than the watch's period is checked too
        final, unread = read_final(run, events)
    finally:
        run.rig.stop()
    for writer in (run.orchestrator, run.nemesis):
        try:
            writer.close()
        except OSError as exc:
            run.disk_full_or_raise(exc)
    # (parsed while it was written: the watch kept every op)
    history = (run.progress.history(run=run.index) if run.progress is not None
               else read_history(run.dir, run=run.index))
    if not run.reasons and not run.rig.failures and not unread:
        run.reasons += leftovers(run, final)
    if run.rig.failures:     # a fault that failed on a broken rig is the rig's failure, not the fault's
        run.reasons += [r for r in run.fault_errors if r not in run.reasons]
        run.fault_errors = []
    elif not unread:
        run.reasons += missed_effects(faults, history)
    result = check_run(history, final, run=run.index, unknown_reasons=run.reasons, seed=run.seed,
                       rig_failures=run.rig.failures, explained=set().union(*(f.explains() for f in faults)),
                       consumers_live=bool(run.live_consumers) and not unread)
    result.drain_end = run.drain_end or "not run"
    if unread:
        result.counts, result.anomalies, result.anomaly_counts, result.final_state = Counts(), [], {}, {}
        result.unknown_reasons.append(unread)
    return result, history


def missed_effects(faults: Sequence[Any], history: list[dict]) -> list[str]:
    """A reason for each fault whose declared effect (Fault.effect) the history does not show:
    such a run tested nothing (docs/faults.md, "A fault must meet the workload")."""
    reasons = []
    for fault in faults:
        kind = getattr(fault, "effect", "")
        reason = kind and missing_effect(kind, fault.name, history)
        if reason:
            reasons.append(reason)
    return reasons


def read_final(run: Run, events: list[Event]) -> tuple[FinalState, str]:
    """The FinalState, and '' ; or, when the rig lets it not be read in full, an empty one
    (the intended events only) and the sentence saying so (the counts are then left empty)."""
    cell = run.cell
    broken = run.rig.final_state_source()
    if broken:
        return empty_final(events), f"the final state was not read ({broken}): the counts are left empty"
    try:
        return cell.pg(lambda conn: read_final_state(cell.redis, conn, cell.streams, GROUP,
                                                     cell.strategy.ack.dlq, events)), ""
    except RIG_ERRORS as exc:
        run.rig_error(exc, "final-state read")
        return empty_final(events), (f"the final state could not be read ({type(exc).__name__}: {str(exc).strip()[:300]}): "
                                     f"the counts are left empty")


def empty_final(events: list[Event]) -> FinalState:
    seen: dict[str, dict] = {}
    for ev in events:
        seen.setdefault(ev.event_id, ev.intended())
    return FinalState(events=list(seen.values()))


def measure(run: Run, history: list[dict], started: float) -> RunMetrics:
    """Work metrics, the faults' phases and the notes of a run, from its history."""
    handled, work_s, fault_ops = work_metrics(history)
    run.phases += fault_phases(fault_ops, run.index)
    run.notes = [f"run {run.index}: {note}" for note in late_fault_notes(history, run.t0, fault_ops)]
    return RunMetrics(run.index, run.seed, time.monotonic() - started, handled, work_s,
                      handled / work_s if work_s else None, str(run.dir))


def trace(run: Run, result: RunResult, history: list[dict]) -> None:
    """The run's ops, phases and notes as trace lines (`--trace`), when the cell asks for them."""
    out = run.cell.trace
    if out is None:
        return
    from chaos.trace import trace_lines
    out(f"--- run {run.index} (seed {run.seed}): {result.verdict}")
    for line in trace_lines(history, origin=run.t0):
        out(line)
    out("phases: " + ", ".join(
        f"{p.name} {(p.start - run.t0) * 1000:.0f}..{(p.end - run.t0) * 1000:.0f} ms"
        for p in sorted(run.phases, key=lambda p: p.start)))
    for note in run.notes:
        out(f"note: {note}")
