"""Open registries: a guard and a fault registered only in this test (chaos.extensions.register)
run in a real cell; the guard runs in the consumer processes the fork server starts."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from chaos import extensions
from chaos.events import Event
from chaos.history import read_history
from chaos.params import Param
from chaos.orchestrator import run_cell
from chaos.strategies.guards import GUARDS, Guard, Outcome
from chaos.strategies.guards.base import APPLIED
from faults.interface import FaultContext
from faults.registry import FAULTS, get_fault
from faults.window import WindowFault


class StampingGuard(Guard):
    """The plain write, plus an op naming the process that ran it (a consumer, not this test)."""

    name = "test-stamping"
    summary = "plain UPDATE that records which process applied each event"
    params = ()

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        rows = self.write_in_tx(ev)
        self.env.op("info", "log", event_id=ev.event_id, value={"stamped_by": "test-stamping"})
        return Outcome(rows, APPLIED, {"status": ev.etype})


class Nudge(WindowFault):
    """A fault that only records its window (what a team's fault minimally is)."""

    name = "test-nudge"
    description = "records a window and does nothing else"
    params = (Param("at_ms", 50, "when the window opens"), Param("duration_ms", 100, "how long it stays open"))

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        return {"nudged": True}

    def stop(self, ctx: FaultContext) -> list[str]:
        return []


@pytest.fixture
def registered():
    extensions.register("guards", StampingGuard.name, StampingGuard)
    extensions.register("faults", Nudge.name, Nudge)
    yield
    extensions.unregister("guards", StampingGuard.name)
    extensions.unregister("faults", Nudge.name)


def test_registration_reaches_the_registries_and_is_taken_back(registered):
    assert GUARDS[StampingGuard.name] is StampingGuard
    assert isinstance(get_fault(Nudge.name), Nudge)
    records = {r["name"]: r for r in extensions.records()}
    assert records[StampingGuard.name]["target"].endswith(":StampingGuard")
    assert records[StampingGuard.name]["file"] == __file__


def test_unregistered_names_are_gone():
    assert StampingGuard.name not in GUARDS and Nudge.name not in FAULTS


def test_a_guard_registered_in_a_test_runs_in_the_consumer_processes(registered, cluster):
    cell = run_cell(cluster, "s1", [Nudge.name], runs=1, seed=2, time_scale=0.3,
                    parts={"guard": StampingGuard.name}, keep_runs="always")
    try:
        history = read_history(Path(cell.run_dirs[0]), run=0)
    finally:
        shutil.rmtree(cell.run_root, ignore_errors=True)
    stamps = [op for op in history if op["f"] == "log" and (op.get("value") or {}).get("stamped_by")]
    assert cell.verdict == "valid", (cell.unknown_reasons, cell.counts.as_dict())
    assert len(stamps) == cell.counts.handled == 2
    assert {op["process"] for op in stamps} <= {"C1"}, "the guard ran in the consumer process"
    assert [p.name for p in cell.phases].count(f"fault:{Nudge.name}") == 1
