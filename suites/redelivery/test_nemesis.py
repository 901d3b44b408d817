"""A seeded random schedule of faults (Jepsen's nemesis) against a correct strategy.

Cells: chaos/expectations/redelivery.py. Each run must have played every fault of its
schedule (the schedule's length is drawn from the seed: exponential gaps, so a seed may
draw a single fault); the schedule is recorded in the history and replays with --chaos-seed.
"""
from __future__ import annotations

import pytest

from chaos.expectations.redelivery import NEMESIS_CELLS

# The schedule, its windows and the workload scale together (publishing still outlasts the schedule),
# and what the row asks for holds whatever the timing (CAS + redelivery): the cells run at half
# (faults of 125 ms, ~1.4 s of publishing a run).
NEMESIS_SCALE = 0.5


@pytest.mark.parametrize("cell", NEMESIS_CELLS, ids=[c.test_id for c in NEMESIS_CELLS])
def test_nemesis_cell(cell, chaos_cell, chaos_options) -> None:
    outcome = chaos_cell(cell, check=False, time_scale=min(chaos_options.time_scale, NEMESIS_SCALE))
    played = []
    for run in range(len(outcome.histories)):
        ops = outcome.fault_ops(run)
        schedule = next(v["schedule"] for v in ops if v.get("name") == "nemesis" and v.get("phase") == "start")
        starts = [v["name"] for v in ops if v.get("phase") == "start" and v.get("name") != "nemesis"]
        assert len(starts) >= 1 and len(starts) == len(schedule), (
            f"run {run}: schedule {schedule}, faults started {starts}; {outcome.figures()}")
        played.append(starts)
    outcome.check()
    print(f"{cell.test_id}: faults per run {played}; {outcome.figures()}")
