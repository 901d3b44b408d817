"""Load: 2,000 events (10^5 with --chaos-load-size full) over many orders, a fault firing in
the middle of the backlog, for `recommended` and `baseline`. Cells and their expected
figures: chaos/expectations/load.py.

Each test first proves its fault really hit (a killed consumer, publishes refused during
the blip, a promotion), then judges the cell by its row in the expectation table.
"""
from __future__ import annotations

import pytest

from chaos.cellrun import CellRun
from chaos.expectations.load import cells, load_size
from chaos.pytest_plugin.core import options_of


def fault_hit(outcome: CellRun, run: int) -> list[str]:
    """What is missing from the run's history for each of the cell's faults to have acted."""
    history = outcome.histories[run]
    missing = []
    faults = "+".join(outcome.cell.faults)
    if "kill-consumer" in faults and not any(
            op["f"] == "fault" and op["value"].get("name") == "kill-consumer"
            and op["value"].get("phase") == "start" for op in history):
        missing.append("no consumer was killed")
    if "publish-blip" in faults and not any(
            op["f"] == "publish" and op["type"] in ("fail", "info") for op in history):
        missing.append("no publish was refused during the blip (did the producer finish before it?)")
    if "promote-replica" in faults and not any(
            op["f"] == "fault" and op["value"].get("name") == "promote-replica"
            and op["value"].get("phase") == "stop" and op["value"].get("failed_over") for op in history):
        missing.append("no failover happened")
    return missing


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The session's size's cells (--chaos-load-size, else $CHAOS_LOAD_SIZE: the plugin's ChaosOptions)."""
    if "cell" in metafunc.fixturenames:
        size_cells = cells(load_size(options_of(metafunc.config).load_size))
        metafunc.parametrize("cell", size_cells, ids=[c.test_id for c in size_cells])


def test_load_cell(cell, chaos_cell, chaos_options) -> None:
    outcome = chaos_cell(cell, check=False)
    total = load_size(chaos_options.load_size).total
    for run in range(len(outcome.histories)):
        missing = fault_hit(outcome, run)
        assert not missing, f"run {run} of {cell.test_id} ({total} events): {missing}; {outcome.figures()}"
    outcome.check()
    print(f"{cell.test_id}: {outcome.figures()} in {outcome.result.wall_s:.1f} s")
