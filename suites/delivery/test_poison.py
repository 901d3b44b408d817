"""The poison fault adds a job that fails at every attempt to the poison presets' workload.

Cells: chaos/expectations/delivery.py (the presets' own 10 poison jobs are the ordering
suite's reference rows; here the fault's one extra job must land beside them).
"""
from __future__ import annotations

import pytest

from chaos.expectations.delivery import POISON_CELLS


@pytest.mark.parametrize("cell", POISON_CELLS, ids=[c.test_id for c in POISON_CELLS])
def test_poison_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    for run, history in enumerate(outcome.histories):
        failed = {op.get("event_id") for op in history if op["f"] == "apply" and op["type"] == "fail"}
        assert "ej7-1" in failed, f"run {run}: the poisoned job never failed; {outcome.figures()}"
    outcome.check()
    print(f"{cell.test_id}: {outcome.figures()}")
