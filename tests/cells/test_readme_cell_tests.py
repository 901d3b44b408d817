"""The README's "What a test looks like" tests, run as written in a directory of their own."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## What a test looks like", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_cell_tests_run_as_written(tmp_path):
    blocks = section_blocks()
    assert len(blocks) == 2 and all("def test_" in b for b in blocks), blocks
    for index, block in enumerate(blocks):
        (tmp_path / f"test_readme_{index}.py").write_text(block)
    summary = tmp_path / "summary.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    # One run a cell (`--chaos-runs`, as the README says): what is under test here is the README's code
    # and its rows' lookup; the same rows at their full run counts are CI's too (suites/failover's
    # test_failover_cell[s5], suites/delivery's ack-after kill-consumer cell, suites/ordering's s1 row),
    # and at the time scale those run them (`--chaos-time-scale 0.5`: the failover and kill-consumer
    # cells' own, TIME_SCALE in chaos/expectations/failover.py and delivery.py).
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--chaos-summary={summary}",
                          "--chaos-runs", "1", "--chaos-time-scale", "0.5", str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    cells = json.loads(summary.read_text())["cells"]
    assert sorted((c["preset"], c["fault"], c["match"]) for c in cells) == [
        ("ack-after", "kill-consumer", True), ("s1", "none", True), ("s5", "promote-replica", True)], cells
    assert "chaos cells: 3" in run.stdout
