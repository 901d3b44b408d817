"""The order of a run's phases is written once (chaos/orchestrator/sequence.py `run_phases`),
for the orchestrator and the black box alike: no other module of chaos/ enters a phase by
name."""
from __future__ import annotations

import ast
from pathlib import Path

from chaos.orchestrator.phaseclock import PHASES

ROOT = Path(__file__).resolve().parents[2]
SEQUENCE = "chaos/orchestrator/sequence.py"


def phase_entries(text: str) -> list[tuple[str, str, int]]:
    """Calls `x.phase("<phase>")` / `x.enter("<phase>", ...)` naming one of PHASES: (method, phase, line)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("phase", "enter") and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in PHASES):
            found.append((node.func.attr, node.args[0].value, node.lineno))
    return found


def test_only_the_sequence_enters_phases_by_name() -> None:
    elsewhere = [f"{rel}:{line} {method}({name!r})"
                 for path in sorted((ROOT / "chaos").rglob("*.py"))
                 if (rel := str(path.relative_to(ROOT))) != SEQUENCE
                 for method, name, line in phase_entries(path.read_text())]
    assert not elsewhere, (f"phases entered outside {SEQUENCE}: {elsewhere}; give the runner a step of "
                           "run_phases' Steps instead of writing the order again")


def test_the_sequence_names_every_phase_and_the_scan_sees_them() -> None:
    """(So the test above can fail: the scan finds the sequence's own entries.)"""
    named = {name for _, name, _ in phase_entries((ROOT / SEQUENCE).read_text())}
    assert named == set(PHASES), sorted(named)
    assert phase_entries('clock.enter("drain")\nrun.phase("heal")') == [("enter", "drain", 1), ("phase", "heal", 2)]
