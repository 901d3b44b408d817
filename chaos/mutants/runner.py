"""Run each mutant against the expectation rows of the part it breaks; killed = a cell left its row.

The rows come from the same plan `chaos matrix` runs (this topology's; the load area's
10^5-event cells are left out for time). A row's cell runs with the broken part in place of
the built-in one, its parameters kept, and is judged by that row. Rows are tried in order
(the mutant's likeliest killers first, then the no-fault rows) and a mutant's run stops at
its first kill. `control=True` runs the same cells with the built-in part: a sound row
leaves nothing then.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from chaos.cellspec import CellSpec, Spec
from chaos.mutants import MUTANTS, Mutant
from chaos.strategies.presets import resolve

SKIPPED_AREAS = ("load",)   # 10^5-event cells: minutes each
UNKNOWN = "unknown"


@dataclass
class CellOutcome:
    """One row's cell under the mutant: `left` its row, `kept` it, or `unknown` (could not tell)."""

    cell: str
    area: str
    outcome: str
    verdict: str
    mismatches: list[str]
    wall_s: float


@dataclass
class MutantResult:
    name: str
    mutates: str
    what: str
    killed: bool
    killed_by: list[str]
    cells: list[CellOutcome] = field(default_factory=list)
    candidates: int = 0
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cell_label(spec: CellSpec) -> str:
    """`s1:paid_at_ms=300 x kill-consumer`: the row's cell (its parts are the mutant's business)."""
    return f"{spec.preset_text} x {spec.fault_text}"


def with_part(spec: CellSpec, slot: str, part: Spec) -> CellSpec:
    """`spec` with `part` in `slot` (in place when the cell already replaces that slot, else added)."""
    parts = dict(spec.parts)
    parts[slot] = part
    return spec.but(parts=tuple(parts.items()))


def candidate_cells(m: Mutant, topology: str = "replica") -> list[tuple[Any, CellSpec]]:
    """(planned row, its cell with the broken part) for every row of the part `m` breaks."""
    from chaos.report.matrix import plan_cells, split_by_topology
    planned, _ = split_by_topology(plan_cells(), topology)
    found = []
    for cell in planned:
        if cell.area in SKIPPED_AREAS or cell.expected is None:
            continue
        strategy = resolve(cell.spec.preset, parts=dict(cell.parts))
        part = getattr(strategy, m.slot)
        broken = m.replaces.get(part.name)
        if broken is None or (m.only_after_ack and not strategy.ack.after):
            continue
        found.append((cell, with_part(cell.spec, m.slot, Spec.of(broken.name, part.changed()))))

    def order(item: tuple[Any, CellSpec]) -> tuple[int, int]:
        spec = item[0].spec
        names = [f.name for f in spec.faults] + [spec.preset_text]   # `first` names faults, or presets with params
        first = min((m.first.index(n) for n in names if n in m.first), default=len(m.first))
        return first, 1 if names else 0
    return sorted(found, key=order)


def run_mutant(m: Mutant, cluster: Any, *, seed: int = 0, time_scale: float = 1.0, runs: int | None = 1,
               max_cells: int = 4, control: bool = False, topology: str = "replica",
               on_cell: Callable[[CellOutcome], None] | None = None) -> MutantResult:
    """Run `m` against its rows until one leaves its expectation (or `max_cells` kept theirs)."""
    from chaos.orchestrator import run_spec
    started = time.monotonic()
    candidates = candidate_cells(m, topology)
    result = MutantResult(m.name, m.mutates, m.what, False, [], candidates=len(candidates))
    m.register()
    try:
        for cell, broken in candidates[:max_cells]:
            t0 = time.monotonic()
            spec = (cell.spec if control else broken).but(runs=runs or cell.runs, seed=seed, time_scale=time_scale,
                                                          backend=cluster.backend, topology=cluster.topology_text,
                                                          server=cluster.server)
            measured = run_spec(cluster, spec, keep_runs="never", raise_fault_errors=False)
            mismatches = cell.expected.mismatches(measured)
            outcome = UNKNOWN if measured.verdict == UNKNOWN else ("left" if mismatches else "kept")
            label = cell_label(cell.spec)
            done = CellOutcome(label, cell.area, outcome, measured.verdict, mismatches,
                               round(time.monotonic() - t0, 2))
            result.cells.append(done)
            if on_cell is not None:
                on_cell(done)
            if outcome == "left":
                result.killed = True
                result.killed_by.append(label)
                break
    finally:
        m.unregister()
    result.wall_s = round(time.monotonic() - started, 2)
    return result


def run_all(cluster: Any, names: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    """Every mutant (or those named): the JSON of `python -m chaos mutants --json`."""
    started = time.monotonic()
    chosen = [m for m in MUTANTS if not names or m.name in names]
    results = [run_mutant(m, cluster, **kw) for m in chosen]
    killed = sum(r.killed for r in results)
    return {"mutants": [r.to_json() for r in results], "killed": killed, "total": len(results),
            "score": round(killed / len(results), 3) if results else 0.0,
            "wall_s": round(time.monotonic() - started, 2)}
