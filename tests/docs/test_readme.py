"""The README must stay true: its expectation table is the registered one, and the
commands its quick start names exist."""
from __future__ import annotations

import re
from pathlib import Path

from chaos.expectations.markdown import END, START, render_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_expectation_table_is_the_registered_table():
    text = README.read_text()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == render_markdown(), (
        "README's expectation table is stale: run `python -m chaos.expectations.markdown --write README.md`")


def test_readme_quick_start_commands_exist():
    text = README.read_text()
    assert "bash scripts/setup.sh && python3 -m pytest suites/failover -n 4" in text
    assert "bash scripts/setup.sh && python3 -m pytest -n 4" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python3 -m pytest -n 4" in ci, ".ci/run must run the README's test command"
    for doc in re.findall(r"\]\((docs/[^)]+)\)", text):
        assert (README.parent / doc).exists(), f"README links {doc}, which does not exist"
