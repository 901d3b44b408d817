"""Running one cell from a suite: run_cell, the fault ops of each run, the assertion.

Shared by suites/{delivery,producer,redelivery,failover}: a test is one Cell, run on the
pytest worker's cluster with the session's seed and time scale, judged by the row the
same Cell put into the expectation table, with the measured figures in the message.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.checker import CellResult
from chaos.expectations import assert_cell, expect
from chaos.history import read_history
from faults.interface import FaultError
from faults.cells import Cell


@dataclass
class CellRun:
    """A cell's result plus each run's history (read before the run dirs are removed)."""

    cell: Cell
    result: CellResult
    histories: list[list[dict]]

    def fault_ops(self, run: int, name: str | None = None) -> list[dict]:
        """The values of the ``fault`` ops of one run (optionally of one fault)."""
        return [op["value"] for op in self.histories[run]
                if op["f"] == "fault" and (name is None or op.get("value", {}).get("name") == name)]

    def figures(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.result.counts.as_dict().items())


def run(cell: Cell, cluster: Any, options: Any, *, runs: int | None = None) -> CellRun:
    """Run a cell (``--chaos-runs`` overrides its run count); errors if a fault did not heal."""
    from chaos.run import run_cell

    count = runs or getattr(options, "runs", None) or cell.runs
    try:
        result = run_cell(cluster, cell.preset, list(cell.faults), runs=count, seed=options.seed,
                          time_scale=options.time_scale, parts=dict(cell.parts) or None, keep_runs="always")
    except FaultError as exc:
        cluster.rebuild(reason=f"fault did not heal: {exc}")  # the next test gets a sound topology
        raise
    histories = [read_history(Path(d), run=i) for i, d in enumerate(result.run_dirs)]
    return CellRun(cell, result, histories)


def check(outcome: CellRun) -> None:
    """Assert the cell against its row in the expectation table (figures in the message)."""
    cell = outcome.cell
    expectation = expect(cell.preset, list(cell.faults), dict(cell.parts))
    assert_cell(outcome.result, expectation, preset=cell.preset, fault="+".join(cell.faults))


def run_and_check(cell: Cell, cluster: Any, options: Any) -> CellRun:
    outcome = run(cell, cluster, options)
    check(outcome)
    return outcome


def discard(outcome: CellRun, options: Any) -> None:
    """Remove the run dirs of a passing cell (kept with --chaos-keep-runs)."""
    if not getattr(options, "keep_runs", False):
        shutil.rmtree(outcome.result.run_root, ignore_errors=True)
