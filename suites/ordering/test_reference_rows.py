"""One test per consumer-side reference row (fault `none`), judged by chaos/expectations/ordering.py.

Each test also states the row's own figure (baseline wrong 10/10, S4c's release answering
0, S5-RR's retried serialization errors) so a failure reads like the reference table.
baseline, S4c and S5-RR break on a race with created's 800 ms job that a loaded machine can
lose; CI runs them under fault `hold`, which forces it (chaos/expectations/ordering.py FORCED).
"""
from __future__ import annotations

import pytest

from chaos.expectations.ordering import FORCED

ROWS = [
    ("s1", 10), ("s5", 10), ("inbox", 5), ("setnx-dedupe", 5),
    ("p2-business", 3), ("p2-entry-id", 3), ("p3", 5), ("p4", 5), ("recommended", 2),
]
# These rows break nothing (each must end right, whatever the interleaving): a run is created's
# 800 ms job and paid's 50 ms, so they run at a quarter (200 and 12.5 ms; the rows of two consumers
# still have paid done ~190 ms before created, the single-consumer rows only wait less). A run:
# 0.62 s at 0.5, 0.33 s at 0.25 (`python -m chaos run --preset s1 --runs 10`).
ROW_SCALE = 0.25
# The forced rows' race is the hold's, whatever the scale: they run at half (created's job after the
# hold 400 ms, s4c's lock TTL 250 ms, still past paid's 25 ms job).
FORCED_SCALE = 0.5


@pytest.mark.parametrize("preset, runs", ROWS, ids=[r[0] for r in ROWS])
def test_reference_row(preset, runs, chaos_cell, chaos_options):
    scale = min(chaos_options.time_scale, ROW_SCALE)
    _assert_row_figures(preset, chaos_cell(preset, runs=runs, time_scale=scale).result)


@pytest.mark.parametrize("cell", FORCED, ids=[c.test_id for c in FORCED])
def test_forced_reference_row(cell, chaos_cell, chaos_options):
    outcome = chaos_cell(cell, time_scale=min(chaos_options.time_scale, FORCED_SCALE))
    for run in range(outcome.result.run_count):
        stop = [v for v in outcome.fault_ops(run, "hold") if v.get("phase") == "stop"]
        assert stop and stop[0]["until_reached_by"], f"run {run}: the hold never saw paid applied: {stop}"
    _assert_row_figures(cell.preset_name, outcome.result)


def _assert_row_figures(preset, cell):
    n, c = cell.run_count, cell.counts
    print(f"{preset}: wrong {c.wrong_final_state_runs}/{n}, reordered {c.reordered}, lost {c.lost}, "
          f"retries {c.retries}, releases_failed {c.releases_failed}")
    if preset == "baseline":
        assert c.wrong_final_state_runs == n and all(r.final_state["42"]["status"] == "created" for r in cell.runs)
    if preset == "s4c":
        assert c.releases_failed >= n, "created's compare-and-delete must answer 0 (the lock was not ours)"
    if preset in ("s5", "s5-rr", "s1", "p3", "p4"):
        assert all(r.final_state["42"] == {"status": "paid", "version": 2} for r in cell.runs)
    if preset == "s5-rr":
        assert c.retries >= n, "every run's created transaction must hit 40001 once and be retried"


# (preset, runs, time scale at most): the 2000 jobs of 5 ms are the whole run of the first two
# (no fault, no race: 17-18 s at scale 1), so they run at a quarter (1.25 ms jobs beside ~1.6 ms of
# the consumer's own work a job: ack-after's workload 8.3 s at 0.5, 6.2 s at 0.25, `chaos run
# --trace`); the poison rows keep theirs.
BULK = [("ack-after", 1, 0.25), ("ack-on-receive", 1, 0.25), ("poison-no-dlq", 1, 1.0), ("poison-dlq", 1, 1.0)]


@pytest.mark.slow
@pytest.mark.parametrize("preset, runs, scale", BULK, ids=[r[0] for r in BULK])
def test_bulk_row_without_fault(preset, runs, scale, chaos_cell, chaos_options):
    cell = chaos_cell(preset, runs=runs, time_scale=min(chaos_options.time_scale, scale)).result
    c = cell.counts
    print(f"{preset}: handled {c.handled}, pending_left {c.pending_left}, dlq {c.dlq}, lost {c.lost}")
