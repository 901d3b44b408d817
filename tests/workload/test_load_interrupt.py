"""Ctrl-C of a load run: a terminal sends SIGINT to the whole foreground process group
(orchestrator, fork server, workers, servers). Nothing may keep running, and the run dir
must stay with a partial history that the checker still reads."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from chaos.checker import FinalState, check_run
from chaos.cluster.rundirs import base_dir
from chaos.history import read_history

ROOT = Path(__file__).resolve().parents[2]


def _published(run_root: Path) -> int:
    count = 0
    for path in run_root.glob("*/run-*/history/P-order.jsonl"):
        with open(path, "rb") as fh:
            count = sum(1 for line in fh if b'"type":"ok","f":"publish"' in line)
    return count


def test_ctrl_c_of_a_load_run_stops_everything_and_keeps_a_readable_history(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "chaos", "run", "--preset", "recommended", "--runs", "1", "--json",
           "--part", "workload=many-orders:keys=1000,events=50,cost_ms=0", "--run-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True,  # its own group, as a terminal's foreground job
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while _published(tmp_path) < 1000:  # interrupt mid-workload, not during start-up
            assert proc.poll() is None, f"the run ended before the interrupt: {proc.communicate()[1][-2000:]!r}"
            assert time.monotonic() < deadline, "the producer never published 1,000 events"
            time.sleep(0.1)
        group = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        assert len(group) >= 5  # servers, proxy, fork server, producer, consumers
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert b"interrupted" in err
    time.sleep(0.5)
    alive = [pid for pid in group if psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"still running after Ctrl-C: {[' '.join(psutil.Process(p).cmdline()) for p in alive]}"
    assert not (base_dir() / f"cli-{proc.pid}").exists(), "the cluster's dir (servers' data) was left behind"
    run_dirs = list(tmp_path.glob("*/run-000"))
    assert len(run_dirs) == 1, f"the run dir is gone: {list(tmp_path.rglob('*'))[:10]}"
    history = read_history(run_dirs[0])
    assert sum(1 for op in history if op["f"] == "publish" and op["type"] == "ok") >= 1000
    counts = check_run(history, FinalState()).counts  # no final state: the history alone
    assert counts.published >= 1000 and counts.unexpected == 0
