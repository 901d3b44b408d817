"""A stalled consumer's entries are claimed by another; the stalled one writes late.

Cells: chaos/expectations/redelivery.py. Each run must have stalled a consumer and
delivered its entry again through XAUTOCLAIM.
"""
from __future__ import annotations

import pytest

from chaos.expectations.redelivery import CELLS


@pytest.mark.parametrize("cell", CELLS, ids=[c.test_id for c in CELLS])
def test_xautoclaim_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    for run, history in enumerate(outcome.histories):
        phases = [v.get("phase") for v in outcome.fault_ops(run, "xautoclaim")]
        assert phases == ["start", "stop"], f"run {run}: xautoclaim ops {phases}; {outcome.figures()}"
        claims = [op for op in history if op["f"] == "deliver" and op["type"] == "ok" and op.get("via") == "claim"]
        assert claims, f"run {run}: nothing was claimed; {outcome.figures()}"
    outcome.check()
    print(f"{cell.test_id}: {outcome.figures()}")
