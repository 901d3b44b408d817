"""The check phase: read the final state, judge the history (chaos.checker), and what a
run measured beside the counts (metrics, the faults' phases, notes, the trace)."""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from chaos.checker import NOT_READ, check_run
from chaos.events import Event
from chaos.history import HistorySource
from chaos.orchestrator.drain import leftovers
from chaos.orchestrator.livefold import Folded
from chaos.orchestrator.notes import WorkNotes, fault_phases, late_fault_notes
from chaos.orchestrator.rigwatch import RIG_ERRORS
from chaos.orchestrator.run import Run
from chaos.results import Counts, FinalState, RunMetrics, RunResult
from chaos.strategies.delivery.base import GROUP
from chaos.workload.final_state import Intended, give_back, read_final_state
from faults.effects import missing as missing_effect


def check(run: Run, events: list[Event] | Intended, faults: Sequence[Any] = ()) -> tuple[RunResult, HistorySource, WorkNotes]:
    """The run's RunResult, its history (the orchestrator's and nemesis's closed first) and
    what the check's pass over it noted. A fault whose declared effect the history does not
    show makes the run unknown. The history is read from its files as the checker goes (a
    chunk of each file at a time) and the streams' entries in pages: memory for the keys and
    the events, not for every op (docs/performance.md)."""
    give_back()   # (what the workload's phases freed: planning, the watch's state, the fold's reads)
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
    history = HistorySource(run.dir, run=run.index)
    if not run.reasons and not run.rig.failures and not unread:
        run.reasons += leftovers(run, final)
    if run.rig.failures:     # a fault that failed on a broken rig is the rig's failure, not the fault's
        run.reasons += [r for r in run.fault_errors if r not in run.reasons]
        run.fault_errors = []
    elif not unread:
        run.reasons += missed_effects(faults, history)
    folded = Folded(run.progress)   # (the history folded while it was written, or a scan of the files now)
    notes = folded.notes
    judge = partial(check_run, history.without(NOT_READ), run=run.index, unknown_reasons=run.reasons, seed=run.seed,
                    rig_failures=run.rig.failures, explained=set().union(*(f.explains() for f in faults)),
                    observe=notes.observe, folded=folded)
    try:
        result = judge(final, consumers_live=bool(run.live_consumers) and not unread)
    except RIG_ERRORS as exc:   # the streams are read in pages as the checker goes
        run.rig_error(exc, "final-state read")
        unread = (f"the final state could not be read ({type(exc).__name__}: {str(exc).strip()[:300]}): "
                  f"the counts are left empty")
        result = judge(empty_final(events), rig_failures=run.rig.failures)
    result.drain_end = run.drain_end or "not run"
    result.live_workers = list(run.live_consumers)
    if unread:
        result.counts, result.anomalies, result.anomaly_counts, result.final_state = Counts(), [], {}, {}
        result.unknown_reasons.append(unread)
    give_back()   # (the checker's records: the next run of the cell starts from what is left)
    return result, history, notes


def missed_effects(faults: Sequence[Any], history: Iterable[dict]) -> list[str]:
    """A reason for each fault whose declared effect (Fault.effect) the history does not show:
    such a run tested nothing (docs/faults.md, "A fault must meet the workload"). (It reads
    the history into memory, for runs with such a fault only: faults.effects indexes it.)"""
    reasons = []
    declared = [f for f in faults if getattr(f, "effect", "")]
    ops = history.passes(list) if declared and isinstance(history, HistorySource) else list(history) if declared else []
    for fault in declared:
        reason = missing_effect(fault.effect, fault.name, ops)
        if reason:
            reasons.append(reason)
    return reasons


def read_final(run: Run, events: list[Event] | Intended) -> tuple[FinalState, str]:
    """The FinalState, and '' ; or, when the rig lets it not be read in full, an empty one
    (the intended events only) and the sentence saying so (the counts are then left empty)."""
    cell = run.cell
    broken = run.rig.final_state_source()
    if broken:
        return empty_final(events), f"the final state was not read ({broken}): the counts are left empty"
    try:
        return cell.pg(lambda conn: read_final_state(cell.redis, conn, cell.streams, GROUP,
                                                     cell.strategy.ack.dlq, events, paged=True)), ""
    except RIG_ERRORS as exc:
        run.rig_error(exc, "final-state read")
        return empty_final(events), (f"the final state could not be read ({type(exc).__name__}: {str(exc).strip()[:300]}): "
                                     f"the counts are left empty")


def empty_final(events: list[Event] | Intended) -> FinalState:
    return FinalState(events=events if isinstance(events, Intended) else Intended(events))


def measure(run: Run, history: HistorySource, notes: WorkNotes, started: float) -> RunMetrics:
    """Work metrics, the faults' phases and the notes of a run, from what the check's pass
    over its history noted (the history is read again only when a fault started after the
    last publish)."""
    handled, work_s = notes.work()
    fault_ops = notes.faults
    run.phases += fault_phases(fault_ops, run.index)
    late = partial(late_fault_notes, t0=run.t0, faults=fault_ops, last_publish=notes.last_publish)
    run.notes = [f"run {run.index}: {note}" for note in history.passes(late)]
    return RunMetrics(run.index, run.seed, time.monotonic() - started, handled, work_s,
                      handled / work_s if work_s else None, str(run.dir))


def trace(run: Run, result: RunResult, history: HistorySource) -> None:
    """The run's ops, phases and notes as trace lines (`--trace`), when the cell asks for them."""
    out = run.cell.trace
    if out is None:
        return
    from chaos.trace import trace_lines
    out(f"--- run {run.index} (seed {run.seed}): {result.verdict}")
    for line in history.passes(partial(trace_lines, origin=run.t0)):
        out(line)
    out("phases: " + ", ".join(
        f"{p.name} {(p.start - run.t0) * 1000:.0f}..{(p.end - run.t0) * 1000:.0f} ms"
        for p in sorted(run.phases, key=lambda p: p.start)))
    for note in run.notes:
        out(f"note: {note}")
