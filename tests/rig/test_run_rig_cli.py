"""Issue 14's "done when" through the command line: `python -m chaos run ... --json` with the
proxy server or PostgreSQL SIGKILLed mid-run exits 2, prints the whole JSON object with verdict
`unknown` and the component named, and leaves no process of that run behind. The same runs show
that an unknown cell keeps the run dir it names even when the bound ($CHAOS_KEPT_DIRS=0) keeps
none (the retention of test_cli_rundirs.py, on a cell that only a real broken rig makes unknown)."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from rig_helpers import run_cli_breaking, wait_gone
from test_cli_rundirs import cell_dirs

ARGS = ["--preset", "s5", "--part", "workload=many-orders:keys=400,events=5,cost_ms=2", "--runs", "2",
        "--time-scale", "0.5"]


@pytest.mark.parametrize("component", ["proxy server", "PostgreSQL"])
def test_cli_run_with_a_killed_rig_part_exits_2_unknown_and_named(component, tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_KEPT_DIRS", "0")          # the bound would remove every dir...
    old = cell_dirs(tmp_path, 10, 20)
    run = run_cli_breaking(component, ARGS, after_s=0.5, sig=signal.SIGKILL, run_dir=tmp_path)
    assert run.broken_pid, f"the {component} was never killed; stderr:\n{run.stderr[-2000:]}"
    assert run.code == 2, run.stderr[-3000:]
    out = run.out
    assert out["verdict"] == "unknown"
    assert out["rig_failures"], out["unknown_reasons"]
    assert out["rig_failures"][0].startswith(f"run 0: {component} (pid {run.broken_pid}) died: killed by SIGKILL")
    assert out["per_run"] and out["per_run"][0]["verdict"] == "unknown"
    assert len(out["per_run"]) == 1, "a broken rig ends the cell"
    assert "Traceback" not in run.stderr
    assert wait_gone(run.seen_pids, 10) == [], "a process of the run outlived it"
    named = Path(out["run_dir"])
    assert sorted(tmp_path.iterdir()) == [named], "...but the one this command named (and printed)"
    assert list(named.rglob("*.jsonl")) and not (named / "owner.json").exists()
    assert f"run dirs kept in {named} ({tmp_path} keeps the newest $CHAOS_KEPT_DIRS entries" in run.stderr
    assert not any(p.exists() for p in old)
