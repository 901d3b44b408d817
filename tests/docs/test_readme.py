"""The README must stay true: the expectation table it links (docs/expectations.md) is the
registered one, and the commands its quick start names exist."""
from __future__ import annotations

import re
from pathlib import Path

from chaos.expectations.markdown import END, START, render_markdown

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTATIONS = README.parent / "docs" / "expectations.md"


def test_documented_expectation_table_is_the_registered_table():
    text = EXPECTATIONS.read_text()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == render_markdown(), ("docs/expectations.md is stale: run "
                                        "`python -m chaos.expectations.markdown --write docs/expectations.md`")
    assert "](docs/expectations.md)" in README.read_text(), "the README no longer links the expectation table"


def _quick_start_pytest_commands(text: str) -> list[str]:
    """The `pytest` commands of the README's quick start, as written (argument text after `pytest`)."""
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            match = re.search(r"python3? -m pytest(.*)$", line)
            if match:
                found.append(match.group(1).strip())
    return found


def test_readme_quick_start_commands_exist():
    """The quick start's pytest commands are read from the README: their paths exist, the one
    without a path (the whole suite) is what CI runs, and a cell count stated beside a
    command is what that command collects."""
    import shlex
    import subprocess
    import sys

    text = README.read_text()
    commands = _quick_start_pytest_commands(text)
    assert len(commands) >= 2, f"the quick start should show the suite and the whole-suite commands: {commands}"
    ci = (README.parent / ".ci" / "run").read_text()
    ci_args = [m.strip() for m in re.findall(r"python3? -m pytest(.*)$", ci, flags=re.M)]
    whole = [c for c in commands if not any(not a.startswith("-") and "/" in a or a in ("suites", "tests")
                                             for a in shlex.split(c))]
    assert whole, f"no whole-suite command in the quick start: {commands}"
    for command in whole:
        assert any(args.startswith(command) for args in ci_args), (
            f".ci/run must run the README's test command `pytest {command}`; it runs: {ci_args}")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for command in commands:
        paths = [a for a in shlex.split(command) if not a.startswith("-") and not a.isdigit()]
        for path in paths:
            assert (README.parent / path).exists(), f"the quick start runs `pytest {command}`: {path} does not exist"
        stated = re.search(re.escape(command) + r"\s*```\s*\((\d+) cells", section)
        if stated and paths:
            done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *paths],
                                  capture_output=True, text=True, timeout=120, cwd=README.parent)
            collected = re.search(r"(\d+) tests? collected", done.stdout)
            assert collected, done.stdout[-1500:] + done.stderr[-1500:]
            assert int(collected.group(1)) == int(stated.group(1)), (
                f"the README says `pytest {command}` runs {stated.group(1)} cells; it collects {collected.group(1)}")
    for doc in re.findall(r"\]\((docs/[^)]+)\)", text):
        assert (README.parent / doc).exists(), f"README links {doc}, which does not exist"
