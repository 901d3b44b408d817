"""Issue 14's "done when" through the command line: `python -m chaos run ... --json` with the
proxy server or PostgreSQL SIGKILLed mid-run exits 2, prints the whole JSON object with verdict
`unknown` and the component named, and leaves no process of that run behind. The same runs show
that an unknown cell keeps the run dir it names even when the bound ($CHAOS_KEPT_DIRS=0) keeps
none (the retention of test_cli_rundirs.py, on a cell that only a real broken rig makes unknown)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rig_helpers import run_cli_breaking, wait_gone
from test_cli_rundirs import cell_dirs

# chaos/cli/run_cmd.py (_say_kept) indents every line of a reason's log tail by six spaces under it
QUOTED = " " * 6


def own_tracebacks(stderr: str) -> list[str]:
    """The lines of stderr that open a traceback of the CLI's own process or its children
    (Python writes an uncaught exception's, a thread's or an atexit hook's from column 0), not
    of one the CLI quotes from a dead rig part's log tail (the proxy's socketserver prints
    "Exception occurred during processing of request ... Traceback" when its peer vanishes)."""
    return [line for line in stderr.splitlines() if "Traceback" in line and not line.startswith(QUOTED)]


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
    assert not own_tracebacks(run.stderr), run.stderr[-3000:]
    assert wait_gone(run.seen_pids, 10) == [], "a process of the run outlived it"
    named = Path(out["run_dir"])
    assert sorted(tmp_path.iterdir()) == [named], "...but the one this command named (and printed)"
    assert list(named.rglob("*.jsonl")) and not (named / "owner.json").exists()
    assert f"run dirs kept in {named} ({tmp_path} keeps the newest $CHAOS_KEPT_DIRS entries" in run.stderr
    assert not any(p.exists() for p in old)


def test_a_traceback_of_the_cli_is_told_from_one_it_quotes(tmp_path):
    """The check above still fails when the CLI itself crashes: a team plugin that raises on
    import ($CHAOS_PLUGINS; main() catches only a missing module there) ends the real CLI with
    Python's traceback, which own_tracebacks finds beside a quoted one, as a loaded run printed it."""
    (tmp_path / "crashing_plugin.py").write_text("raise RuntimeError('the plugin is broken')\n")
    env = dict(os.environ, CHAOS_PLUGINS="crashing_plugin",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), str(tmp_path)]))
    crash = subprocess.run([sys.executable, "-m", "chaos", "run", "--preset", "s5", "--runs", "1", "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert crash.returncode == 1 and "RuntimeError: the plugin is broken" in crash.stderr, crash.stderr
    quoted = ("  run 0: proxy server (pid 32148) died: killed by SIGKILL; log tail:\n"
              f"{QUOTED}--- /dev/shm/chaos-clusters/cli-32100/proxy/proxy.log\n"
              f"{QUOTED}Exception occurred during processing of request from ('127.0.0.1', 42170)\n"
              f"{QUOTED}Traceback (most recent call last):\n"
              f"{QUOTED}ConnectionResetError: [Errno 104] Connection reset by peer\n")
    assert own_tracebacks(quoted) == []
    assert own_tracebacks(quoted + crash.stderr) == ["Traceback (most recent call last):"]
