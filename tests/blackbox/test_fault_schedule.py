"""Both runners go through the same phases (chaos/orchestrator/phaseclock.py) and start, join and
heal faults through one schedule (chaos/orchestrator/faultthreads.py):
a fault that fails, at its arm or while it acts, is healed and gives the same reason and verdict
unknown in an orchestrated cell and in a black-box cell (which once crashed on a fault that
could not be armed, and named only FaultErrors)."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from chaos import extensions
from chaos.blackbox.config import load_config
from chaos.blackbox.session import parse_faults, run_blackbox
from chaos.orchestrator import run_cell
from chaos.orchestrator.phaseclock import PHASES
from chaos.params import Param
from faults.interface import FaultContext, FaultError
from faults.window import WindowFault

ROOT = Path(__file__).resolve().parents[2]
REASON = "run 0: fault test-refuses did not act or heal: FaultError: refused on purpose"


def fault_reasons(cell: Any) -> list[str]:
    return [r for r in cell.unknown_reasons if Refuses.name in r]


class Refuses(WindowFault):
    """A fault whose start always fails: at its arm (at_ms=0) or in its thread (at_ms > 0)."""

    name = "test-refuses"
    description = "fails to start, at arm or later"
    params = (Param("at_ms", 0, "when it tries to start"), Param("duration_ms", 100, "how long it would last"))
    heals: list[str] = []

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        raise FaultError("refused on purpose")

    def heal(self, ctx: FaultContext) -> None:
        Refuses.heals.append(self.spec)
        super().heal(ctx)


@pytest.fixture
def refuses():
    extensions.register("faults", Refuses.name, Refuses)
    Refuses.heals.clear()
    yield
    extensions.unregister("faults", Refuses.name)


@pytest.mark.parametrize("at_ms", [0, 100])
def test_a_failing_fault_is_healed_and_named_the_same_by_both_runners(refuses, cluster, at_ms) -> None:
    spec = f"{Refuses.name}:at_ms={at_ms}"
    cell = run_cell(cluster, "s1", [spec], runs=1, seed=2, time_scale=0.3, keep_runs="never",
                    raise_fault_errors=False)
    shutil.rmtree(cell.run_root, ignore_errors=True)
    assert cell.verdict == "unknown" and REASON in cell.unknown_reasons, cell.unknown_reasons
    assert len(Refuses.heals) == 1

    # 50 keys (100 events over 0.2 s, past at_ms=100), not the example's 100: the reason and the
    # phases do not rest on the burst's size, and the workers drain a smaller backlog
    example = load_config(ROOT / "examples/redis_py_cas.toml")
    config = replace(example, workload=replace(example.workload, keys=50))
    box = run_blackbox(cluster, "python -m examples.redis_py_cas", config, faults=parse_faults([spec]), cwd=ROOT)
    assert box.cell.verdict == "unknown" and REASON in box.cell.unknown_reasons, box.cell.unknown_reasons
    assert fault_reasons(box.cell) == fault_reasons(cell)
    assert len(Refuses.heals) == 2
    assert box.count("published") == 100, "the run went on to its check (its figures are kept)"
    names = [p.name for p in box.cell.phases]
    assert names == list(PHASES), f"the black-box run goes through the orchestrator's phases, in order: {names}"
    assert all(a.end <= b.start for a, b in zip(box.cell.phases, box.cell.phases[1:]))
    assert {p.name for p in cell.phases} <= set(PHASES) | {f"fault:{Refuses.name}"}
