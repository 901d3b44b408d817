"""Server and stream faults: a Redis restart from its AOF, a MAXLEN trim of pending
entries, a rolling deploy (SIGTERM). Cells: chaos/expectations/redelivery.py."""
from __future__ import annotations

import pytest

from chaos.expectations.redelivery import SERVER_CELLS


@pytest.mark.parametrize("cell", SERVER_CELLS, ids=[c.test_id for c in SERVER_CELLS])
def test_server_fault_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    name = cell.spec.faults[0].name
    for run in range(len(outcome.histories)):
        starts = [v for v in outcome.fault_ops(run, name) if v.get("phase") == "start"]
        assert starts, f"run {run}: {name} never fired; {outcome.figures()}"
    outcome.check()
    print(f"{cell.test_id}: {[outcome.fault_ops(r, name) for r in range(len(outcome.histories))]}; "
          f"{outcome.figures()}")
