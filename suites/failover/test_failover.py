"""Failover under asynchronous replication: promote-replica with replication held.

Every cell really fails over (a run without a promotion fails the test), loses entries
the old primary acknowledged, and delivers already processed entries again; the guard
decides whether those copies corrupt the state. Cells: chaos/expectations/failover.py
(one per preset that fits, so a new strategy adds its cell). A run short of the row's published
bound only by events the retrying producer gave up before the promotion (the outage outlasted
its retries: a loaded machine) is `unknown`, not a mismatch (vouch_published).
"""
from __future__ import annotations

from collections import Counter

import pytest

from chaos.cellrun import CellRun
from chaos.report.rows import UNKNOWN_OUTCOME
from chaos.expectations import UnknownVerdict
from chaos.expectations.failover import (CELLS, FAULT_NAME, PUBLISHED_PER_RUN, TIME_SCALE, WAIT_CELL, WAIT_MS,
                                         prefetches)

PRESET_CELLS = [c for c in CELLS if c is not WAIT_CELL]


def scale(options) -> float:
    """The session's time scale, at most the cells' (chaos/expectations/failover.py TIME_SCALE)."""
    return min(options.time_scale, TIME_SCALE)


def promoted_at(outcome: CellRun, run: int) -> float:
    """When the run's replica was promoted; fails the test if it never was."""
    history = outcome.histories[run]
    stops = [op for op in history if op["f"] == "fault" and op.get("value", {}).get("name") == FAULT_NAME
             and op["value"].get("phase") == "stop"]
    assert stops and stops[0]["value"].get("failed_over"), (
        f"NO FAILOVER in run {run} of {outcome.cell.test_id}: fault ops {outcome.fault_ops(run)}; "
        f"{outcome.figures()}")
    return stops[0]["time"]


def redeliveries_by_via(outcome: CellRun, run: int) -> Counter:
    """Deliveries after the promotion of events already delivered before it, by how they came."""
    at = promoted_at(outcome, run)
    history = outcome.histories[run]
    before = {op["event_id"] for op in history
              if op["f"] == "deliver" and op["type"] == "ok" and op["time"] < at and op.get("event_id")}
    return Counter(op.get("via") for op in history
                   if op["f"] == "deliver" and op["type"] == "ok" and op["time"] >= at
                   and op.get("event_id") in before)


def given_up_in_outage(outcome: CellRun, run: int) -> tuple[int, float]:
    """(events the producer gave up, never published nor seen by a consumer, whose every attempt
    began before the promotion; the outage from the kill to the promotion in seconds): the
    retrying producer's retries ran out while no primary was there, its defined behaviour."""
    history = outcome.histories[run]
    promoted = promoted_at(outcome, run)
    killed = next(op["time"] for op in history if op["f"] == "fault"
                  and op["value"].get("name") == FAULT_NAME and op["value"].get("step") == "kill")
    last_try: dict[str, float] = {}
    done: set[str] = set()
    for op in history:
        event = op.get("event_id")
        if not event:
            continue
        if op["f"] == "publish" and op["type"] == "invoke":
            last_try[event] = op["time"]
        elif (op["f"] == "publish" and op["type"] == "ok") or op["f"] in ("deliver", "apply"):
            done.add(event)
    return sum(1 for e, t in last_try.items() if e not in done and t < promoted), promoted - killed


def vouch_published(outcome: CellRun) -> None:
    """A run below the row's published bound only by events given up in the outage did not have
    the outage the bound assumes (one within the producer's retries): UnknownVerdict, naming it.
    Any other shortfall (events given up after the promotion) is left to the row: a mismatch."""
    if outcome.expectation is None or "published" not in outcome.expectation.bounds:
        return
    short = []
    for run, result in enumerate(outcome.result.runs):
        published = result.counts.published
        if published >= PUBLISHED_PER_RUN:
            continue
        given_up, outage_s = given_up_in_outage(outcome, run)
        if published + given_up >= PUBLISHED_PER_RUN:
            short.append(f"run {run}: published {published}, {given_up} given up with every attempt in the "
                         f"{outage_s:.3f} s from the kill to the promotion")
    if short:
        raise UnknownVerdict(f"UNKNOWN: {outcome.label}: the failover's outage outlasted the retrying producer's "
                             f"retries, so the row's published >= {PUBLISHED_PER_RUN} a run could not be tested: "
                             f"{'; '.join(short)}; {outcome.figures()}\nrun dirs: {outcome.run_root}")


@pytest.mark.parametrize("cell", PRESET_CELLS, ids=[c.test_id.split("|", 1)[0] + ("+" + c.spec.faults[1].name if len(c.faults) > 1 else "")
                              for c in PRESET_CELLS])
def test_failover_cell(cell, chaos_cell, chaos_options) -> None:
    outcome = chaos_cell(cell, check=False, time_scale=scale(chaos_options))
    if outcome.outcome == UNKNOWN_OUTCOME:
        outcome.check()   # UnknownVerdict naming why (e.g. the kill never found what `until` names), not a figure
    kinds = [redeliveries_by_via(outcome, run) for run in range(len(outcome.histories))]
    per_run = [(r.counts.lost, r.counts.redelivered) for r in outcome.result.runs]
    figures = (f"{outcome.figures()}; per run (lost, redelivered): {per_run}; redelivered after "
               f"promotion per run by via: {[dict(k) for k in kinds]}")
    # Every run: processed entries delivered again, and (unless the reader had read them all
    # into memory) acknowledged events lost.
    assert all(redelivered >= 1 for _, redelivered in per_run), f"a run redelivered nothing: {figures}"
    if not prefetches(cell.preset):
        assert all(lost >= 1 for lost, _ in per_run), f"a run lost nothing: {figures}"
        # Entries read and acked while held come back as NEW entries to XREADGROUP >: a
        # recovery that only scans the PEL would miss them.
        assert sum(k["read"] for k in kinds) >= 1, f"no processed entry came back as new: {figures}"
    vouch_published(outcome)
    outcome.check()
    print(f"{cell.test_id}: {figures}")


def confirmed_lost(outcome: CellRun) -> tuple[int, int]:
    """(WAIT-confirmed publishes, of those never handled) over all runs."""
    confirmed = lost = 0
    for history in outcome.histories:
        ok = {op["event_id"] for op in history if op["f"] == "publish" and op["type"] == "ok"
              and (op.get("value") or {}).get("replicas", 0) >= 1}
        handled = {op["event_id"] for op in history if op["f"] == "apply" and op["type"] == "ok"
                   and op.get("effect", "applied") in ("applied", "stale")}
        confirmed += len(ok)
        lost += len(ok - handled)
    return confirmed, lost


def at_risk_in_hold(outcome: CellRun, run: int) -> tuple[int, float]:
    """(publishes WAIT reported unconfirmed that began between the hold and the kill, the hold's
    length in seconds): what the WAIT producer was told a failover could take."""
    history = outcome.histories[run]
    ops = [op for op in history if op["f"] == "fault" and op["value"].get("name") == FAULT_NAME]
    held = next(op["time"] for op in ops if op["value"].get("phase") == "start")
    killed = next(op["time"] for op in ops if op["value"].get("step") == "kill")
    began = {}
    risky = 0
    for op in history:
        if op["f"] != "publish":
            continue
        if op["type"] == "invoke":
            began[op["event_id"]] = op["time"]
        elif op["type"] == "info" and "WAIT" in str((op.get("value") or {}).get("error", "")):
            risky += held <= began.get(op["event_id"], -1.0) <= killed
    return risky, killed - held


def test_wait_confirmed_producer_loses_far_less(chaos_cell, chaos_options) -> None:
    """WAIT 1 after each XADD: no publish WAIT confirmed is lost, so the WAIT producer loses no
    acknowledged event where the plain one loses some in every run (its row holds the link until
    an acked entry nobody read is there); what the failover can take from it is what WAIT said
    was not confirmed, at most one publish per WAIT timeout of the hold (WAIT blocks that long
    when no replica answers, and this producer publishes one event at a time).
    The plain producer's side is test_failover_cell[s1]: the same cell (preset_cell("s1")), whose
    row and test fail unless it loses acknowledged events in each run; this test ran it again."""
    time_scale = scale(chaos_options)
    waited = chaos_cell(WAIT_CELL, check=False, time_scale=time_scale)
    for run in range(len(waited.histories)):
        promoted_at(waited, run)
    if waited.outcome == UNKNOWN_OUTCOME:
        waited.check()   # UnknownVerdict naming why (the kill never found what `until` names)
    confirmed, lost_confirmed = confirmed_lost(waited)
    wait_s = max(1, round(WAIT_MS * time_scale)) / 1000   # the producer's WAIT timeout (scaled, as it sends it)
    risk = [at_risk_in_hold(waited, run) for run in range(len(waited.histories))]
    figures = (f"WAIT 1 producer lost {waited.result.counts.lost} of {waited.result.counts.published} "
               f"({confirmed} confirmed by WAIT, {lost_confirmed} of those lost; per run (unconfirmed publishes "
               f"begun in the hold, hold s) {[(n, round(s, 3)) for n, s in risk]}, WAIT timeout {wait_s} s) "
               f"over {waited.result.run_count} runs")
    assert lost_confirmed == 0, f"a WAIT-confirmed event was lost: {figures}"
    assert waited.result.counts.lost == 0, f"WAIT did not lose far less than the plain producer: {figures}"
    for n, held_s in risk:
        # (each WAIT blocks its whole timeout, give or take Redis's 1 ms clock: at the cells' scale, 12 ms)
        assert wait_s < 0.005 or n <= held_s / (wait_s - 0.001) + 1, (
            f"more unconfirmed publishes than WAIT timeouts fit in the hold: {figures}")
    waited.check()
    print(figures)
