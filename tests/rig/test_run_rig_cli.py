"""Issue 14's "done when" through the command line: `python -m chaos run ... --json` with the
proxy server or PostgreSQL SIGKILLed mid-run exits 2, prints the whole JSON object with verdict
`unknown` and the component named, and leaves no process of that run behind."""
from __future__ import annotations

import signal

import pytest

from rig_helpers import run_cli_breaking, wait_gone

ARGS = ["--preset", "s5", "--part", "workload=many-orders:keys=400,events=5,cost_ms=2", "--runs", "2",
        "--time-scale", "0.5"]


@pytest.mark.parametrize("component", ["proxy server", "PostgreSQL"])
def test_cli_run_with_a_killed_rig_part_exits_2_unknown_and_named(component, tmp_path):
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
