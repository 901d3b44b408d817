"""Cells: one (preset, faults) combination with its run count and expected figures.

An area module (chaos/expectations/failover.py, ...) lists its cells once; the same list
gives the expectation table its rows and the suites their parametrization, so a cell
cannot be run with other parameters than the row that judges it. The plugin's
``chaos_cell`` fixture (chaos/cellrun.py) runs one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from chaos.cellspec import CellSpec
from chaos.expectations.table import Row, row


@dataclass(frozen=True)
class Cell:
    """A preset spec (``s1:paid_at_ms=300``), fault specs, how many runs, what must hold."""

    preset: str
    faults: tuple[str, ...]
    runs: int
    bounds: Mapping[str, Any]
    note: str = ""
    parts: Mapping[str, str] = field(default_factory=dict)   # whole parts replaced: {"workload": "many-orders:..."}
    id: str = ""

    @cached_property
    def spec(self) -> CellSpec:
        """The cell's parsed identity (its own run count; seed and time scale are the session's)."""
        return CellSpec.parse(self.preset, self.faults, self.parts, runs=self.runs)

    @property
    def fault_names(self) -> str:
        return self.spec.fault_names

    @property
    def params(self) -> dict[str, str]:
        """The row key's parameters: preset's, faults' (``<fault>.<k>``) and replaced parts."""
        return self.spec.params

    @property
    def preset_name(self) -> str:
        return self.spec.preset.name

    def row(self) -> Row:
        return row(self.preset_name, self.fault_names, note=self.note, params=self.params, **self.bounds)

    @property
    def test_id(self) -> str:
        return self.id or f"{self.preset}|{'+'.join(self.faults)}"


def rows(cells: list[Cell]) -> list[Row]:
    return [c.row() for c in cells]
