"""Hooks a project may implement in its conftest.py (or a plugin of its own).

    # conftest.py
    def pytest_chaos_cell_finished(cell, result):
        dashboard.send(result.row)
"""
from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_chaos_cell_finished(cell: Any, result: Any) -> None:
    """A cell run by ``chaos_cell`` finished, before its expectation is asserted.

    ``cell`` is the ``chaos.expectations.cells.Cell`` that ran (preset, faults, parts, runs);
    ``result`` is the ``chaos.cellrun.CellRun``: ``.result`` the CellResult (chaos.results: counts,
    verdicts, runs), ``.row`` the summary row (the ``--chaos-summary`` JSON object),
    ``.expectation`` the expectation it is judged by (None when the test judges it itself). Called on the xdist worker that ran
    the cell, once per cell; what it raises fails the test.
    """
