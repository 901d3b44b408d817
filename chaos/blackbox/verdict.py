"""The black-box checker adapter: observed effects -> the built-in checker's counts.

The built-in checker (chaos/checker.py) reads apply ops from worker histories. A
black-box worker writes none, so the observed effects are turned into the same ops
and the same ``check_run`` gives lost, duplicated, reordered, wrong final state and
pending left, with the same definitions:

* each committed write of the state table becomes an ``apply ok`` (rows=1, applied)
  of the event with that (key, business version), in commit order;
* an event with no write of its own whose key later got a higher version committed is
  reported as ``superseded_unobserved``. If the config says the consumer may skip stale
  events (``[state] skips_stale = true``, the default: a CAS looks exactly like that from
  outside) it counts as handled (``apply ok``, rows=0, stale); with ``skips_stale =
  false`` (a consumer that writes every event) it is ``lost``;
* the side-effect table gives ``side_effects``, ``duplicated_side_effects`` (events with
  more than one effect row) and ``missing_side_effects`` (events applied without one).

Deliveries are not observable from outside, so ``delivered``, ``redelivered`` and
``recovered`` stay 0 (the Redis PEL at the end still gives ``pending_left``).

Liveness is judged: when the drain ended for want of progress with a worker alive and
every fault healed (``Liveness.consumers_live``), published events never handled and
still undelivered or pending are the consumer's ``stopped-consuming`` anomaly (invalid).
A run in which most intended events' fate is unknown (``indeterminate`` + ``dropped``:
the producer could not tell, or gave up) judged too little of the consumer: unknown.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chaos.blackbox.config import WorkerConfig
from chaos.blackbox.counts import BlackBoxCounts, Liveness, stalled_after_heal
from chaos.blackbox.effects import Effect
from chaos.blackbox.redis_state import StreamState
from chaos.checker import check_run
from chaos.results import STOPPED_CONSUMING, UNKNOWN, VALID, FinalState, RunResult

OBSERVER = "postgres"  # the process name of synthesized apply ops
WRITES = ("INSERT", "UPDATE")


@dataclass
class BlackBoxRun:
    """One run: the checker's result plus the black-box figures."""

    result: RunResult
    extra: BlackBoxCounts
    history: list[dict] = field(default_factory=list)
    liveness: Liveness = field(default_factory=Liveness)


def wall_to_monotonic() -> float:
    """Offset to turn this machine's wall-clock seconds into time.monotonic() seconds."""
    return time.monotonic() - time.time()


def effect_version(config: WorkerConfig, effect: Effect) -> int | None:
    """The business version a state write carries: its column, or derived from the status."""
    if config.state.version_from_status is not None:
        return config.state.version_from_status.get(effect.status or "")
    return effect.version


def effect_ops(config: WorkerConfig, effects: list[Effect], events: list[Any], offset: float,
               published: set[str] | None = None) -> tuple[list[dict], BlackBoxCounts]:
    """Apply ops for the checker (commit order, monotone times) and the side-effect figures.

    ``published``: event ids that reached the stream (None: all); only those can be
    superseded-but-unwritten (an event whose every publish failed was never there)."""
    by_key_version = {(e.key, e.version): e for e in events}
    by_id = {e.event_id: e for e in events}
    extra = BlackBoxCounts(effects=len(effects))
    ops: list[dict] = []
    clock = float("-inf")
    applied: set[str] = set()
    first_above: dict[str, list[tuple[int, float]]] = {}
    side = Counter()
    for eff in effects:
        clock = max(clock, eff.at + offset)
        if eff.role == "side_effect":
            ev = by_id.get(eff.event_id) if eff.event_id else by_key_version.get((eff.key, eff.version))
            if ev is not None:
                side[ev.event_id] += 1
            continue
        if eff.op not in WRITES:
            continue
        version = effect_version(config, eff)
        ev = by_key_version.get((eff.key, version))
        if ev is None:
            extra.unattributed_writes += 1
            continue
        applied.add(ev.event_id)
        first_above.setdefault(ev.key, []).append((version, clock))
        ops.append(_apply_op(ev, clock, rows=1, effect="applied", txid=eff.txid, commit_seq=eff.commit_seq))
    for ev in events:
        if ev.event_id in applied or (published is not None and ev.event_id not in published):
            continue
        later = [t for v, t in first_above.get(ev.key, []) if v > ev.version]
        if later:
            extra.superseded_unobserved += 1
            if config.state.skips_stale:
                ops.append(_apply_op(ev, min(later), rows=0, effect="stale"))
    if config.side_effects is not None:
        extra.side_effects = sum(side.values())
        extra.duplicated_side_effects = sum(1 for n in side.values() if n > 1)
        extra.missing_side_effects = sum(1 for eid in applied if side[eid] == 0)
    return ops, extra


def _apply_op(ev: Any, at: float, *, rows: int, effect: str, **value: Any) -> dict:
    return {"time": at, "process": OBSERVER, "type": "ok", "f": "apply", "event_id": ev.event_id,
            "key": ev.key, "version": ev.version, "etype": ev.etype, "rows": rows, "effect": effect,
            **({"value": value} if value else {})}


def final_rows(conn: Any, config: WorkerConfig) -> dict[str, dict]:
    """key -> {status, version} from the user's state table (version derived if configured)."""
    from psycopg import sql

    s = config.state
    cols = [sql.Identifier(s.key), sql.Identifier(s.status)]
    if s.version:
        cols.append(sql.Identifier(s.version))
    query = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(cols), sql.Identifier(*s.table.split(".", 1)))
    rows: dict[str, dict] = {}
    for r in conn.execute(query).fetchall():
        version = r[2] if s.version else (s.version_from_status or {}).get(r[1])
        rows[str(r[0])] = {"status": r[1], "version": version}
    return rows


def check_blackbox_run(config: WorkerConfig, *, history: list[dict], effects: list[Effect],
                       rows: dict[str, dict], stream: StreamState, events: list[Any], offset: float,
                       run: int = 0, seed: int | None = None, unknown_reasons: list[str] = (),
                       liveness: Liveness | None = None, poison: list[Any] = ()) -> BlackBoxRun:
    """The built-in checker over the producer/nemesis history plus the observed effects;
    ``liveness``: how the drain ended (see the module doc); ``poison``: the poison events
    published beside the workload (no part of it: their fate is counted apart)."""
    shown = history      # the run's record keeps the poison's publishes (trace, plots); the checker does not
    history, stream, poison_figures = split_poison(history, stream, poison)
    reached = {op["event_id"] for op in history if op.get("f") == "publish" and op.get("type") == "ok"}
    reached |= {e["event_id"] for e in stream.stream_entries if e.get("event_id")}
    ops, extra = effect_ops(config, effects, events, offset, reached)
    merged = sorted([*history, *ops], key=lambda op: op["time"])
    final = FinalState(rows=rows, stream_entries=stream.stream_entries, pending=stream.pending,
                       undelivered=stream.undelivered, dlq=stream.dlq,
                       events=[e.intended() for e in events])
    liveness = liveness or Liveness()
    if liveness.healed_at is not None:
        liveness.stalled_after_heal_s = longest_stall(liveness, merged, stream)
    result = check_run(merged, final, run=run, seed=seed, unknown_reasons=list(unknown_reasons),
                       consumers_live=liveness.consumers_live)
    vouch_for_fates(result, len(events))
    extra.stopped_consuming = result.anomaly_counts.get(STOPPED_CONSUMING, 0)
    for name, value in poison_figures.items():
        setattr(extra, name, value)
    if shown is not history:
        merged = sorted([*shown, *ops], key=lambda op: op["time"])
    return BlackBoxRun(result=result, extra=extra, history=merged, liveness=liveness)


def split_poison(history: list[dict], stream: StreamState, poison: list[Any]
                 ) -> tuple[list[dict], StreamState, dict[str, int]]:
    """The history and the Redis state without the poison events, and the poison's fate:
    entries published, still pending, never read, and dead-letter entries that name a poison
    event or no workload event (a consumer's own dead-letter format may name none)."""
    ids = {e.event_id for e in poison}
    if not ids:
        return history, stream, {}
    entries = {op.get("entry_id") for op in history
               if op.get("f") == "publish" and op.get("type") == "ok" and op.get("event_id") in ids} - {None}

    def mine(entry: dict) -> bool:
        return entry.get("event_id") in ids or entry.get("entry_id") in entries

    kept = StreamState(stream_entries=[e for e in stream.stream_entries if not mine(e)],
                       pending=[e for e in stream.pending if not mine(e)],
                       undelivered=[e for e in stream.undelivered if not mine(e)],
                       dlq=[e for e in stream.dlq if e.get("event_id") not in ids and e.get("event_id") is not None])
    figures = {"poison_published": len(entries), "poison_pending": len(stream.pending) - len(kept.pending),
               "poison_undelivered": len(stream.undelivered) - len(kept.undelivered),
               "poison_dlq": len(stream.dlq) - len(kept.dlq)}
    return [op for op in history if op.get("event_id") not in ids], kept, figures


def longest_stall(liveness: Liveness, history: list[dict], stream: StreamState) -> float | None:
    """``stalled_after_heal_s``: the longest no-progress window with work outstanding after the
    last heal, from the merged history (publishes, observed writes) and what waits in Redis at
    the end; a stall the consumer later recovered from counts too."""
    published: dict[str, float] = {}
    done: dict[str, float] = {}
    progress = [] if liveness.progress_at is None else [liveness.progress_at]
    for op in history:
        eid, f = op.get("event_id"), op.get("f")
        if f == "publish" and op.get("type") == "ok" and eid:
            published.setdefault(eid, op["time"])
        elif f == "apply" and op.get("type") == "ok" and eid:
            done.setdefault(eid, op["time"])
            if op.get("effect") == "applied":
                progress.append(op["time"])
    waiting = {e.get("event_id") for e in [*stream.pending, *stream.undelivered]}
    work = [(at, done.get(eid, math.inf)) for eid, at in published.items() if eid in done or eid in waiting]
    return stalled_after_heal(liveness.healed_at, liveness.ended_at, progress, work)


def vouch_for_fates(result: RunResult, intended: int) -> None:
    """A run in which the fate of most intended events is unknown (indeterminate or
    dropped) judged too little of the consumer to be valid: unknown, with the reason."""
    unknown = result.counts.indeterminate + result.counts.dropped
    if intended and 2 * unknown > intended:
        result.unknown_reasons.append(
            f"the fate of {unknown} of {intended} intended events is unknown (indeterminate "
            f"{result.counts.indeterminate}, dropped {result.counts.dropped}): the producer could not "
            f"publish most of the workload, so the run judged too little of the consumer")
        if result.verdict == VALID:
            result.verdict = UNKNOWN
