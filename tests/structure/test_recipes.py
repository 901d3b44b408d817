"""CONTRIBUTING.md's recipes, each done once: a fault, a preset (and a guard), an expectation
row, a row in a `CELLS` area, a new area with its suite.

The first three go through the public registries only (FAULTS, PRESETS, GUARDS, an area
module's ROWS), and the fault and the preset then run in a real cell on the cluster fixture,
judged by the row that was added. The last two are file edits, made as CONTRIBUTING.md
says in a copy of the checkout's code; pytest then runs the new cells in that copy, each
judged by its row, and the files each recipe changed are counted against the page's number.
"""
from __future__ import annotations

import filecmp
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import chaos.expectations as expectations
import chaos.expectations.ordering as ordering_area
from chaos.events import Event
from chaos.expectations import assert_cell, each_run, eq, expect, ge, row
from chaos.expectations import failover as failover_area
from chaos.params import Param
from chaos.run import run_cell
from chaos.strategies.guards import GUARDS, Guard, Outcome
from chaos.strategies.presets import PRESETS, Preset, resolve
from faults.helpers import pick_worker, process_alive
from faults.interface import FaultContext
from faults.registry import FAULTS, describe_fault, get_fault
from faults.window import WindowFault

FAULT = "recipe-pause"
PRESET = "recipe-s1-cas"
GUARD_PRESET = "recipe-copy-guard"


class RecipePause(WindowFault):
    """Recipe 1, a fault: one class with its parameters, `start` and `stop` (a window fault)."""

    name = FAULT
    description = "SIGSTOP one consumer for a window, then SIGCONT it (the recipe test's fault)"
    params = (
        Param("at_ms", 100, "when the consumer stops, from the start of the workload"),
        Param("duration_ms", 300, "how long it stays stopped"),
    )

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        self.worker = pick_worker(ctx, "consumer")
        self.worker.kill(signal.SIGSTOP)
        return {"worker": self.worker.name}

    def stop(self, ctx: FaultContext) -> list[str]:
        if process_alive(self.worker.pid):
            self.worker.kill(signal.SIGCONT)
        return []


class CopyRejectingGuard(Guard):
    """Recipe 2b, a guard: declares what it promises; the areas derive its cells from that."""

    name = "recipe-copy-rejecting"
    summary = "a stand-in guard that promises to reject redelivered copies, not older versions"
    rejects_copies = True

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        raise NotImplementedError("registered to show the areas reading its promises; never run")


@pytest.fixture
def recipes(monkeypatch: pytest.MonkeyPatch):
    """The one registry line of each recipe, undone after the test."""
    # Every area module imported first, unpatched: an area that builds its cells from PRESETS at
    # import (sentinel) must not keep the recipe's presets for the tests that run after this one.
    expectations.table()
    monkeypatch.setitem(FAULTS, FAULT, f"{__name__}:RecipePause")
    monkeypatch.setitem(PRESETS, PRESET, Preset(PRESET, "single consumer, CAS on the business version",
                                                 delivery="single", guard="cas"))
    monkeypatch.setitem(GUARDS, CopyRejectingGuard.name, CopyRejectingGuard)
    monkeypatch.setitem(PRESETS, GUARD_PRESET, Preset(GUARD_PRESET, "group of 2, the recipe's guard",
                                                      guard=CopyRejectingGuard.name))
    # Recipe 3, an expectation row: one row(...) in an area module's ROWS.
    monkeypatch.setattr(ordering_area, "ROWS", [*ordering_area.ROWS, row(
        PRESET, FAULT, note="a stopped consumer only delays: CAS keeps every key right",
        lost=eq(0), duplicated=eq(0), wrong_final_state_runs=eq(0), verdict="valid")])
    expectations.table.cache_clear()
    yield
    expectations.table.cache_clear()


def test_a_new_fault_is_one_class_and_one_registry_line(recipes) -> None:
    fault = get_fault(f"{FAULT}:duration_ms=500")
    assert isinstance(fault, RecipePause) and fault.duration_ms == 500 and fault.at_ms == 100
    assert "duration_ms=300" in describe_fault(FAULT)
    with pytest.raises(Exception, match="no parameter hold_ms"):
        get_fault(f"{FAULT}:hold_ms=5")


def test_a_new_preset_and_guard_are_resolved_and_picked_up_by_the_areas(recipes) -> None:
    strategy = resolve(PRESET)
    assert (strategy.delivery.name, strategy.guard.name, strategy.workload.name) == ("single", "cas", "pair")
    # The failover area generates a cell for every preset whose parts fit, with bounds from
    # what the guard declares, not from its name.
    assert failover_area.fits(GUARD_PRESET)
    cell = failover_area.preset_cell(GUARD_PRESET)
    lowest = min(failover_area.REORDER_RATES.values(), key=lambda r: r.low)   # a guard not measured
    assert cell.bounds["duplicated"] == eq(0) and cell.bounds["reordered"] == each_run(ge(1), rate=lowest)
    assert cell.runs == lowest.runs
    assert failover_area.preset_cell(PRESET).bounds["reordered"] == eq(0)   # CAS by business version


def test_the_recipes_run_in_a_real_cell_judged_by_the_new_row(recipes, cluster) -> None:
    expected = expect(PRESET, FAULT)
    assert expected is not None, "the added row is looked up by its cell"
    cell = run_cell(cluster, PRESET, [FAULT], runs=2, seed=1, time_scale=0.3)
    assert_cell(cell, expected, preset=PRESET, fault=FAULT)
    assert cell.counts.published == 4 and cell.counts.handled == 4
    stops = [p for p in cell.phases if p.name == f"fault:{FAULT}"]
    assert len(stops) == 2, cell.phases   # the fault acted once in each run


# -- the file recipes: a row in a CELLS area, a new area with its suite -------------------------
ROOT = Path(__file__).resolve().parents[2]
COPIED = ("chaos", "faults", "suites", "conftest.py", "pyproject.toml", "docs/expectations.md")
# The row's blip is forced (the producer area's own way, chaos/expectations/producer.py): on from
# created's first publish, off at its next (the retry), once paid is in. A blip timed by the clock
# (`publish-blip:duration_ms=900`: attempts at 0, 500 and 1000 ms against a 900 ms window) lost the
# race on a loaded machine: the window closed 130 ms late, all three attempts failed, created was
# never published and the row's published == 2 failed (1 of 30 runs beside two CPU hogs, load ~8).
CELLS_ROW = '''    Cell("p2-business", ("publish-blip:at=before_publish,until_entries=1,duration_ms=900",), 1,
         dict(wrong_final_state_runs=eq(0), published=eq(2 * RUNS)),
         note="a longer blip: CAS on the business version still ends paid", id="recipe-cells-row"),
'''
AREA = "recipe_area"
AREA_MODULE = '''"""The recipe test's area: a consumer stopped for a moment only delays a single consumer."""
from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import eq

CELLS = [Cell("s1", ("pause:at_ms=50,duration_ms=150",), 1, dict(lost=eq(0), wrong_final_state_runs=eq(0)),
              note="the recipe's new area", id="recipe-area-cell")]
ROWS = rows(CELLS)
'''
AREA_SUITE = f'''import pytest

from chaos.expectations.{AREA} import CELLS


@pytest.mark.parametrize("cell", CELLS, ids=[c.test_id for c in CELLS])
def test_{AREA}_cell(cell, chaos_cell) -> None:
    chaos_cell(cell)
'''


def recipe_files(heading: str) -> int:
    """The file count CONTRIBUTING.md gives a recipe: '## <heading> (...; N files ...)'."""
    found = re.search(rf"^## {re.escape(heading)} \([^)]*?(\d+) files", (ROOT / "CONTRIBUTING.md").read_text(), re.M)
    assert found, f"CONTRIBUTING.md has no heading '## {heading} (... N files ...)'"
    return int(found.group(1))


def changed(copy: Path) -> list[str]:
    """The files of the copy that differ from the checkout's (or are new)."""
    out = []
    for path in sorted(copy.rglob("*")):
        rel = path.relative_to(copy)
        if path.is_file() and "__pycache__" not in rel.parts and ".pytest_cache" not in rel.parts:
            original = ROOT / rel
            if not original.is_file() or not filecmp.cmp(path, original, shallow=False):
                out.append(str(rel))
    return out


def in_copy(copy: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, text=True, capture_output=True,
                          timeout=timeout)


@pytest.fixture
def checkout_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    for name in COPIED:
        source, target = ROOT / name, copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    return copy


@pytest.mark.slow(seconds=6)
def test_a_cells_row_and_a_new_area_with_its_suite_as_contributing_says(checkout_copy: Path) -> None:
    copy = checkout_copy
    # A row in a CELLS area: one Cell(...) in the area's CELLS list, then the generated page.
    area = copy / "chaos/expectations/producer.py"
    text = area.read_text()
    assert text.count("\n]\nROWS = rows(CELLS)") == 1, "producer.py's CELLS list no longer ends before ROWS"
    area.write_text(text.replace("\n]\nROWS = rows(CELLS)", "\n" + CELLS_ROW + "]\nROWS = rows(CELLS)"))
    page = in_copy(copy, "-m", "chaos.expectations.markdown", "--write", "docs/expectations.md")
    assert page.returncode == 0, page.stderr
    row_files = changed(copy)
    assert row_files == ["chaos/expectations/producer.py", "docs/expectations.md"], row_files
    assert len(row_files) == recipe_files("Adding an expectation row")
    assert CELLS_ROW.splitlines()[0].strip() in (ROOT / "CONTRIBUTING.md").read_text(), \
        "CONTRIBUTING.md's example row is no longer the one this test adds"

    # A new area with its suite: the module, its name in AREA_MODULES, the suite, the page.
    (copy / f"chaos/expectations/{AREA}.py").write_text(AREA_MODULE)
    init = copy / "chaos/expectations/__init__.py"
    listed = init.read_text().replace('AREA_MODULES = ("ordering",', f'AREA_MODULES = ("{AREA}", "ordering",')
    assert listed != init.read_text(), "AREA_MODULES is no longer written as a tuple starting with ordering"
    init.write_text(listed)
    (copy / f"suites/{AREA}").mkdir()
    (copy / f"suites/{AREA}/test_{AREA}.py").write_text(AREA_SUITE)
    page = in_copy(copy, "-m", "chaos.expectations.markdown", "--write", "docs/expectations.md")
    assert page.returncode == 0, page.stderr
    area_files = sorted(set(changed(copy)) - {"chaos/expectations/producer.py"})
    assert area_files == ["chaos/expectations/__init__.py", f"chaos/expectations/{AREA}.py", "docs/expectations.md",
                          f"suites/{AREA}/test_{AREA}.py"], area_files
    assert len(area_files) == recipe_files("Adding an area with its suite")
    assert "recipe-area-cell" not in (ROOT / "docs/expectations.md").read_text()
    for note in ("the recipe's new area", "a longer blip: CAS on the business version still ends paid"):
        assert note in (copy / "docs/expectations.md").read_text(), f"the generated page lacks the row: {note}"

    # pytest runs both new cells in the copy, each judged by its row (a cell without a row fails).
    done = in_copy(copy, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
                   f"suites/{AREA}", "suites/producer", "-k", "recipe-area-cell or recipe-cells-row")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert re.search(r"\b2 passed", out), out[-2000:]
    for test in (f"test_{AREA}_cell[recipe-area-cell]", "test_publish_blip_cell[recipe-cells-row]"):
        assert re.search(rf"PASSED suites/\S+::{re.escape(test)}", out), out[-2000:]
