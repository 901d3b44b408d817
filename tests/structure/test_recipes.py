"""The newcomer's three recipes, each done once: a fault, a preset (and a guard), an expectation row.

Each goes through the public registries only (FAULTS, PRESETS, GUARDS, an area module's
ROWS), as the README tells a newcomer to do it, and the fault and the preset then run in
a real cell on the cluster fixture, judged by the row that was added.
"""
from __future__ import annotations

import signal
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
    assert cell.bounds["duplicated"] == eq(0) and cell.bounds["reordered"] == each_run(ge(1), min_fraction=0.5)
    assert failover_area.preset_cell(PRESET).bounds["reordered"] == eq(0)   # CAS by business version


def test_the_recipes_run_in_a_real_cell_judged_by_the_new_row(recipes, cluster) -> None:
    expected = expect(PRESET, FAULT)
    assert expected is not None, "the added row is looked up by its cell"
    cell = run_cell(cluster, PRESET, [FAULT], runs=2, seed=1, time_scale=0.3)
    assert_cell(cell, expected, preset=PRESET, fault=FAULT)
    assert cell.counts.published == 4 and cell.counts.handled == 4
    stops = [p for p in cell.phases if p.name == f"fault:{FAULT}"]
    assert len(stops) == 2, cell.phases   # the fault acted once in each run
