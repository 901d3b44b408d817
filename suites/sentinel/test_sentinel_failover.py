"""Failover as production does it: Redis Sentinel detects, elects and promotes by itself.

Every run must really have been failed over by Sentinel, and the workers must have found
the new primary by asking Sentinel (their histories record what Sentinel told them).
Cells and their reasoning: chaos/expectations/sentinel.py (CI_CELLS here; the rest run
nightly through `python -m chaos matrix --area sentinel --topology sentinel`).
"""
from __future__ import annotations

from collections import Counter

import pytest

from chaos.cellrun import CellRun
from chaos.expectations.sentinel import CI_CELLS, FAULT_NAME, HELD, PARTITION, REPLAY_5433


def promotion(outcome: CellRun, run: int) -> tuple[float, dict]:
    """(when, what) of the run's promotion; fails the test if Sentinel never promoted."""
    ops = [op for op in outcome.histories[run] if op["f"] == "fault" and op["value"].get("name") == FAULT_NAME]
    stops = [op for op in ops if op["value"].get("phase") == "stop"]
    assert stops and stops[0]["value"].get("failed_over"), (
        f"NO SENTINEL FAILOVER in run {run} of {outcome.cell.test_id}: fault ops {outcome.fault_ops(run)}")
    stop = stops[0]["value"]
    acted = [op["time"] for op in ops if op["value"].get("phase") == "info" and op["value"].get("step") == stop["mode"]]
    return acted[0] + stop["promote_s"], stop


def told(outcome: CellRun, run: int) -> set[str]:
    """Every primary address Sentinel gave the workers in a run."""
    return {op["value"]["master"] for op in outcome.histories[run] if op["f"] == "sentinel"}


def read_again(outcome: CellRun, run: int, at: float) -> int:
    """Events delivered before the promotion and delivered again through `>` after it."""
    history = outcome.histories[run]
    before = {op["event_id"] for op in history if op["f"] == "deliver" and op["type"] == "ok" and op["time"] < at}
    return sum(1 for op in history if op["f"] == "deliver" and op["type"] == "ok" and op["time"] >= at
               and op.get("via") == "read" and op.get("event_id") in before)


def client_errors(outcome: CellRun, run: int) -> Counter:
    """What the producer saw: its failed or unknown publishes, by error type."""
    return Counter(str((op.get("value") or {}).get("error", "?")).split(":")[0]
                   for op in outcome.histories[run] if op["f"] == "publish" and op["type"] in ("fail", "info"))


def cell_id(cell) -> str:
    """The preset and what the fault adds to the rows' shared start (s5, s1|mode=manual,until=...)."""
    short = cell.test_id
    for start in (PARTITION, HELD):
        short = short.replace(start, "")
    return short.rstrip("|,").replace("|,", "|") or cell.test_id


@pytest.mark.parametrize("cell", CI_CELLS, ids=[cell_id(c) for c in CI_CELLS])
def test_sentinel_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    runs = range(len(outcome.histories))
    stops = [promotion(outcome, run) for run in runs]
    timings = [{k: v.get(k) for k in ("detect_s", "promote_s", "demote_s", "acked_after_sync", "took_back")
                if k in v} for _, v in stops]
    again = [read_again(outcome, run, at) for run, (at, _) in zip(runs, stops)]
    figures = (f"{outcome.figures()}; per run: {timings}; read again through > {again}; "
               f"producer saw {[dict(client_errors(outcome, run)) for run in runs]}")
    for run, (_, stop) in zip(runs, stops):
        assert stop["new_primary_address"] in told(outcome, run), (
            f"run {run}: no worker was told the new primary {stop['new_primary_address']} by Sentinel "
            f"(told {told(outcome, run)}): {figures}")
    if cell is REPLAY_5433:
        # redis/redis#5433: entries read and acknowledged on the old primary come back as NEW entries
        assert sum(again) >= 1, f"no acknowledged entry came back through >: {figures}"
    print(f"{cell.test_id}: {figures}")
    outcome.check()


def test_a_failover_after_the_workload_ended_makes_the_run_unknown(chaos_reset_cluster) -> None:
    """s1's two events are acked long before the primary is cut: the failover met no work in
    flight (its declared effect, faults/effects.py), so the run tested nothing and is unknown."""
    from chaos.run import run_cell
    cell = run_cell(chaos_reset_cluster, "s1", [f"{FAULT_NAME}:after_entries=1,at_ms=3000"], runs=1,
                    time_scale=0.25, keep_runs="never")
    assert cell.verdict == "unknown", (cell.verdict, cell.unknown_reasons)
    assert any(f"fault {FAULT_NAME} missed the workload" in r for r in cell.unknown_reasons), cell.unknown_reasons
