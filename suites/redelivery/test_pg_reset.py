"""The PostgreSQL link closes inside a consumer's transaction (rolled back, or committed
with the reply lost); the entry is delivered again. The reset is forced: the consumer stops
before its COMMIT, the toxic goes on, and it stays on until the consumer starts its next apply. Cells: chaos/expectations/redelivery.py.
"""
from __future__ import annotations

import pytest

from chaos.expectations.redelivery import PG_CELLS


# The reset is forced (the failpoint before COMMIT, the toxic on until the next apply) and the
# redelivery is the drain's claim after the entry's min-idle: the cells run at half (100 ms -> 50 ms
# jobs, a 250 ms min-idle in a drain where nobody else works).
PG_RESET_SCALE = 0.5


@pytest.mark.parametrize("cell", PG_CELLS, ids=[c.test_id for c in PG_CELLS])
def test_pg_reset_cell(cell, chaos_cell, chaos_options) -> None:
    outcome = chaos_cell(cell, check=False, time_scale=min(chaos_options.time_scale, PG_RESET_SCALE))
    for run, history in enumerate(outcome.histories):
        starts = [v for v in outcome.fault_ops(run, "pg-reset") if v.get("phase") == "start"]
        assert starts, f"run {run}: the PostgreSQL link was never reset; {outcome.figures()}"
        stops = [v for v in outcome.fault_ops(run, "pg-reset") if v.get("phase") == "stop"]
        # the toxic stayed on until the consumer began its next apply: the reset one met it
        assert [v.get("next_apply") for v in stops] == [True], f"run {run}: pg-reset stop ops {stops}"
        failed = [op for op in history if op["f"] == "apply" and op["type"] in ("fail", "info")]
        assert failed, f"run {run}: no apply saw the reset; {outcome.figures()}"
    outcome.check()
    print(f"{cell.test_id}: {outcome.figures()}")
