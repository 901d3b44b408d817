"""`python -m chaos run --backend external` whose endpoints vanish mid-run: verdict `unknown`
with the endpoint named (by its variable), exit 2, the JSON printed, nothing left running.

The staging servers are a native topology of the test's own (real redis-server, PostgreSQL
and the embedded proxy server), which the external backend did not start; one of them is
SIGKILLed while the orchestrator's producer publishes.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from rig_helpers import breakable_cluster, marked_processes

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = "workload=many-orders:keys=400,events=5,cost_ms=2"   # ~4 s of work: the kill lands mid-run
BREAK_AFTER_S = 0.5


@pytest.fixture
def staging():
    with breakable_cluster(f"ext-staging-{os.getpid()}-{uuid.uuid4().hex[:6]}") as cluster:
        yield cluster


@pytest.mark.slow
@pytest.mark.parametrize("victim, component", [
    ("postgres", "PostgreSQL [CHAOS_POSTGRES]"),
    ("proxy", "proxy server [TOXIPROXY_URL]"),
], ids=["postgres", "proxy-server"])
def test_an_external_endpoint_that_vanishes_mid_run_ends_unknown(victim, component, staging, tmp_path):
    marker = uuid.uuid4().hex
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(CHAOS_REDIS_PRIMARY=str(staging.primary), CHAOS_REDIS_REPLICA=str(staging.replica),
               CHAOS_POSTGRES=str(staging.postgres), TOXIPROXY_URL=staging.api.url, CHAOS_EXTERNAL_WIPE="yes",
               CHAOS_RUNS_DIR=str(runs), CHAOS_TEST_MARKER=marker,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "run", "--preset", "s1", "--part", WORKLOAD,
                             "--runs", "2", "--backend", "external", "--json"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    killed = {"pid": 0}

    def breaker() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if any(os.path.getsize(p) for p in glob.glob(f"{runs}/*/run-000/history/P-order.jsonl")):
                time.sleep(BREAK_AFTER_S)
                killed["pid"] = staging._procs[victim].pid
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=breaker, daemon=True)
    thread.start()
    try:
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    thread.join(5)
    assert killed["pid"], f"the run never published; stderr:\n{stderr[-3000:]}"
    assert proc.returncode == 2, stderr[-3000:]
    data = json.loads(stdout)
    assert data["verdict"] == "unknown", data["unknown_reasons"]
    first = [f for f in data["rig_failures"] if f.startswith("run 0: ")]
    assert first and first[0].startswith(f"run 0: {component}"), data["rig_failures"]
    assert "unreachable at" in first[0].splitlines()[0]
    assert "Traceback" not in stderr
    assert not marked_processes(marker)
    if victim != "proxy":
        assert not any(name.startswith("cli-") for name in staging.api.proxies()), "its proxies were removed"
