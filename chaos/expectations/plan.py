"""What `python -m chaos matrix` runs: the expectation table's rows (or a presets x faults
selection) planned as CellSpecs, each with its area, run count and the row that judges it,
and which preset x fault pairs the table covers. The matrix page (chaos/report/matrix.py)
only renders what the runner made of them."""
from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chaos.cellspec import NO_FAULT, CellSpec, split_faults

DEFAULT_RUNS = 3  # a row whose area module does not say how many runs its cell takes
# Faults that only work on another topology than the default replica one (see docs/cluster.md).
FAULT_TOPOLOGY = {"sentinel-failover": "sentinel"}

@dataclass(frozen=True)
class PlannedRow:
    """One matrix entry to run: the cell's spec, its area, and the row that judges it (or None)."""

    area: str
    spec: CellSpec                    # preset, faults and parts parsed; runs = the area's count
    expected: Any = None              # chaos.expectations.Expectation | None
    unfit: str = ""                   # why a fault refuses this preset (a pair without a row): not run

    @property
    def preset(self) -> str:
        return self.spec.preset_text  # "s1:paid_at_ms=300"

    @property
    def faults(self) -> tuple[str, ...]:
        return tuple(self.spec.fault_texts)   # ("publish-blip:at=before_publish",), () for none

    @property
    def parts(self) -> dict[str, str]:
        return self.spec.part_texts

    @property
    def runs(self) -> int:
        return self.spec.runs

    @property
    def fault(self) -> str:
        return self.spec.fault_text

    @property
    def topology(self) -> str | None:
        """The topology the cell needs (`sentinel`), None when any topology runs it."""
        for spec in self.spec.faults:
            needed = FAULT_TOPOLOGY.get(spec.name)
            if needed:
                return needed
        return None


def split_by_topology(cells: Iterable[PlannedRow], topology: str) -> tuple[list[PlannedRow], list[dict]]:
    """(cells this topology runs, the others as `{area, preset, fault, parts, reason}`)."""
    runnable, skipped = [], []
    for cell in cells:
        if cell.unfit:
            skipped.append({"area": cell.area, "preset": cell.preset, "fault": cell.fault, "parts": dict(cell.parts),
                            "reason": cell.unfit})
        elif cell.topology is None or cell.topology == topology:
            runnable.append(cell)
        else:
            skipped.append({"area": cell.area, "preset": cell.preset, "fault": cell.fault, "parts": dict(cell.parts),
                            "reason": f"needs --topology {cell.topology} (this run: {topology})"})
    return runnable, skipped


def _cell_runs(area: str) -> dict[tuple, int]:
    """Row key -> the run count the area module's cells give it (modules without CELLS: none)."""
    try:
        module = importlib.import_module(f"chaos.expectations.{area}")
    except ModuleNotFoundError:
        return {}
    out = {}
    for cell in getattr(module, "CELLS", None) or []:
        try:
            out[cell.row().cell_key] = int(cell.runs)
        except (AttributeError, TypeError, ValueError):
            continue
    return out


def check_area(area: str | None) -> None:
    from chaos.errors import BadArguments
    from chaos.expectations import AREA_MODULES
    if area is not None and area not in AREA_MODULES:
        raise BadArguments(f"--area {area}: no such area; areas are: {', '.join(AREA_MODULES)}")


def plan_cells(area: str | None = None, presets: Iterable[str] = (), faults: Iterable[str] = ()) -> list[PlannedRow]:
    """The cells `chaos matrix` runs, in table order.

    Without presets and faults: every row of the table (of `area` when given), each with its
    own parameters and its area's run count. With presets and/or faults: the rows of those
    pairs (a missing list means all); a pair the table has no row for runs on its defaults,
    without an expectation (unless an area is given: then only rows run).
    """
    from chaos.expectations import table
    check_area(area)
    presets, faults = list(presets), list(faults)
    rows = [r for r in table().rows() if area is None or r.area == area]
    runs_of: dict[str, dict[tuple, int]] = {}

    def planned(r: Any) -> PlannedRow:
        counts = runs_of.setdefault(r.area, _cell_runs(r.area))
        return PlannedRow(r.area, r.spec().but(runs=counts.get(r.cell_key, DEFAULT_RUNS)), r.expectation)

    if not presets and not faults:
        return [planned(r) for r in rows]
    from chaos.strategies.presets import preset_names
    from faults.registry import fault_names
    presets = presets or preset_names()
    faults = faults or list(dict.fromkeys(["none", *fault_names()]))
    out = []
    for preset in presets:
        for fault in faults:
            spec = CellSpec.parse(preset, () if fault == NO_FAULT else split_faults(fault), runs=DEFAULT_RUNS)
            matching = [r for r in rows if r.preset == spec.preset.name and r.fault == spec.fault_names]
            if matching and not spec.preset.params and not any(f.params for f in spec.faults):
                out += [planned(r) for r in matching]
            elif area is None:
                from chaos.expectations import expect_cell
                out.append(PlannedRow("", spec, expect_cell(spec), _unfit(spec)))
    return out


def _unfit(spec: CellSpec) -> str:
    """Why a fault refuses this preset (long-job on a preset that never claims), else ""."""
    from chaos.errors import BadArguments
    from chaos.strategies.presets import resolve
    from faults.interface import Plan
    from faults.registry import make_fault
    try:
        plan = Plan(strategy=resolve(spec.preset))
        for fault in spec.faults:
            make_fault(fault).check(plan)
    except BadArguments as exc:
        return str(exc)
    return ""


def coverage(presets: Iterable[str] | None = None, faults: Iterable[str] | None = None) -> dict:
    """Which preset x fault pairs the table has rows for: `{"presets", "faults", "rows":
    {preset: {fault: n}}, "uncovered": [[preset, fault], ...]}` (multi-fault rows count
    for each of their faults)."""
    from chaos.expectations import table
    from chaos.strategies.presets import preset_names
    from faults.registry import fault_names
    presets = list(presets or preset_names())
    faults = list(dict.fromkeys(faults or ["none", *fault_names()]))
    rows: dict[str, dict[str, int]] = {}
    for r in table().rows():
        for fault in r.fault_names:
            per = rows.setdefault(r.preset, {})
            per[fault] = per.get(fault, 0) + 1
    uncovered = [[p, f] for p in presets for f in faults if not rows.get(p, {}).get(f)]
    return {"presets": presets, "faults": faults, "rows": rows, "uncovered": uncovered}
