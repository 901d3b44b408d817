"""docs/checker.md must define every count the checker reports: a count without a written
definition cannot be reviewed, and expectation rows are written against those definitions."""
from __future__ import annotations

import re
from pathlib import Path

from chaos.checker import COUNT_NAMES

DOC = Path(__file__).resolve().parents[2] / "docs" / "checker.md"


def documented_counts() -> set[str]:
    """Names in the first cell of the count table rows (`| \\`lost\\` | ...` or `| \\`a\\`, \\`b\\` | ...`)."""
    names: set[str] = set()
    for line in DOC.read_text().splitlines():
        cell = line.split("|")[1] if line.startswith("| `") else ""
        names.update(re.findall(r"`([a-z_]+)`", cell))
    return names


def test_every_count_has_a_definition_in_the_docs():
    missing = sorted(set(COUNT_NAMES) - documented_counts())
    assert not missing, f"docs/checker.md defines no {missing}: add a row to 'What the checker counts'"
