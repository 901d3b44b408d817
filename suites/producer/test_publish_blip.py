"""A network blip on the order service's link while it publishes (the producer reorder).

Cells: chaos/expectations/producer.py. Each run must have seen the blip start and heal.
"""
from __future__ import annotations

import pytest

from chaos.expectations.producer import CELLS


@pytest.mark.parametrize("cell", CELLS, ids=[c.test_id for c in CELLS])
def test_publish_blip_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    for run, history in enumerate(outcome.histories):
        phases = [v.get("phase") for v in outcome.fault_ops(run, "publish-blip")]
        assert phases == ["start", "stop"], f"run {run}: blip ops {phases}; {outcome.figures()}"
        failed = [op for op in history if op["f"] == "publish" and op["type"] in ("fail", "info")
                  and op.get("process") == "P-order"]
        assert failed, f"run {run}: no publish of P-order failed during the blip; {outcome.figures()}"
    outcome.check()
    print(f"{cell.test_id}: {outcome.figures()}")
