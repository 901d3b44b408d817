"""Mutants are killed by the rows of the part they break, and the same rows keep a sound part.

Two mutants run for real (a guard in the consumer processes, a delivery part in the
orchestrator), each through the open registries; the control runs the same first row with
the built-in part and must keep it. Also: each mutant has rows to run against, and its
broken part is gone from the registries after its run."""
from __future__ import annotations

import pytest

from chaos.mutants import MUTANTS, mutant
from chaos.mutants.runner import candidate_cells, run_mutant
from chaos.strategies.delivery import DELIVERIES
from chaos.strategies.guards import GUARDS


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_has_rows_of_the_part_it_breaks(m):
    cells = candidate_cells(m)
    assert cells, f"{m.name}: no row of {m.mutates} to run against"
    for cell, parts in cells:
        assert parts[m.slot].split(":", 1)[0] in {cls.name for cls in m.replaces.values()}


@pytest.mark.parametrize("name", ["cas-without-version", "sharded-random-shard"])
def test_a_mutant_is_killed_and_its_control_is_not(name, cluster):
    m = mutant(name)
    killed = run_mutant(m, cluster, seed=3, max_cells=1)
    assert killed.killed and killed.killed_by == [killed.cells[0].cell], killed
    assert killed.cells[0].mismatches, killed
    control = run_mutant(m, cluster, seed=3, max_cells=1, control=True)
    assert control.cells[0].cell == killed.cells[0].cell
    assert not control.killed and control.cells[0].outcome == "kept", control
    assert not any(cls.name in GUARDS or cls.name in DELIVERIES for cls in m.replaces.values())
