"""Mutants are killed by the rows of the part they break, and the same rows keep a sound part.

Two mutants run for real (a guard in the consumer processes, a delivery part in the
orchestrator), each through the open registries; the control runs the same first row with
the built-in part and must keep it. Also: each mutant has rows to run against, and its
broken part is gone from the registries after its run, and bad input is refused in one line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.mutants import MUTANTS, mutant
from chaos.mutants.runner import candidate_cells, run_mutant
from chaos.strategies.delivery import DELIVERIES
from chaos.strategies.guards import GUARDS


@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_has_rows_of_the_part_it_breaks(m):
    cells = candidate_cells(m)
    assert cells, f"{m.name}: no row of {m.mutates} to run against"
    for cell, broken in cells:
        assert dict(broken.parts)[m.slot].name in {cls.name for cls in m.replaces.values()}
        assert broken.but(parts=cell.spec.parts) == cell.spec      # the row's cell, only the part replaced


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


@pytest.mark.parametrize(("args", "says"), [
    (["--only", "no-such-mutant"], "unknown mutant 'no-such-mutant'; mutants are: cas-without-version"),
    (["--max-cells", "0"], "--max-cells 0 must be >= 1"),
])
def test_bad_input_is_one_line_and_exit_254_before_any_server(args, says):
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "chaos", "mutants", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=60)
    assert done.returncode == 254, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
