"""docs/faults.md's parameter tables are the registry's: every fault, every parameter, every default."""
from __future__ import annotations

from pathlib import Path

from chaos.report.fault_docs import END, START, render_markdown
from faults.registry import fault_class, fault_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "faults.md"


def test_fault_parameter_tables_match_the_registry():
    block = DOC.read_text().split(START, 1)[1].split(END, 1)[0].strip()
    assert block == render_markdown().strip(), (
        "docs/faults.md's parameter tables are stale: run `python -m chaos.report.fault_docs --write docs/faults.md`")


def test_every_declared_parameter_is_documented():
    text = render_markdown()
    for name in fault_names():
        assert f"### `{name}`" in text
        for param in fault_class(name).summary()["params"]:
            assert f"| `{param}` |" in text, f"{name}.{param} is missing from the generated tables"
