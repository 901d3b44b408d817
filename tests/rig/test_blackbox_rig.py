"""A black-box run whose rig breaks mid-session: the proxy server, PostgreSQL or a Redis server
SIGKILLed (or the proxy SIGSTOPped) outside any fault, on the native and the external backend.

Each must end with verdict `unknown` naming the component, exit 2, the JSON printed, and
nothing left running; through the pytest API, with RigFailure (Allure: broken).
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
from dataclasses import dataclass
from pathlib import Path

import pytest

from chaos.cluster.rundirs import base_dir
from chaos.errors import RigFailure
from rig_helpers import breakable_cluster, marked_processes

ROOT = Path(__file__).resolve().parents[2]
WORKER = "python -m examples.redis_py_ack_first"
CONFIG = f"""
[worker]
processes = 1
ready_timeout_s = 60
drain_s = 10
schema = "{ROOT / 'examples/orders_schema.sql'}"
env = {{ ORDERS_WORK_MS = "1", ORDERS_IDLE_TIMEOUT_MS = "500" }}

[workload]
keys = 150                  # 300 events 10 ms apart: the producer is still publishing at the break
gap_ms = 10

[encoder]
format = "plain"
fields = {{ order_id = "key", status = "etype", version = "version", event_id = "event_id" }}

[state]
table = "orders"
key = "id"
status = "status"
version = "version"
skips_stale = false

[side_effects]
table = "order_emails"
event_id = "event_id"
"""
BREAK_AFTER_S = 0.3     # after the first publish
# the cluster dir's owner record names each server process (chaos/cluster/rundirs.py)
COMPONENTS = {"proxy": "proxy server", "postgres": "PostgreSQL", "redis-a": "Redis node a (primary)",
              "redis-b": "Redis node b (replica)"}


@pytest.fixture
def worker_config(tmp_path: Path) -> Path:
    path = tmp_path / "worker.toml"
    path.write_text(CONFIG)
    return path


def first_publish(run_root_glob: str, timeout: float = 90.0) -> bool:
    """Wait until the run's producer has published (its history has a line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in glob.glob(f"{run_root_glob}/*/history/P-order.jsonl"):
            if os.path.getsize(path):
                return True
        time.sleep(0.02)
    return False


def server_pid(cli_pid: int, record: str) -> int:
    """The pid of a server of the CLI's cluster, from its cluster dir's owner record."""
    found = glob.glob(f"{base_dir()}/bb-{cli_pid}-*/owner.json")
    assert found, f"no cluster dir of pid {cli_pid}"
    owner = json.loads(Path(found[0]).read_text())
    return {p["name"]: p["pid"] for p in owner["processes"]}[record]


@dataclass
class Broken:
    code: int
    data: dict
    stderr: str
    victim: int
    marker: str
    pid: int


def run_breaking(tmp_path: Path, config: Path, record: str | None, sig: int = signal.SIGKILL,
                 env: dict[str, str] | None = None, victim_pid: int | None = None, args: list[str] = ()) -> Broken:
    """`python -m chaos run --worker-cmd ... --json` (2 runs asked), one component broken
    BREAK_AFTER_S after the first run's first publish."""
    marker = uuid.uuid4().hex
    runs = tmp_path / "runs"
    full_env = {**os.environ, **(env or {}), "CHAOS_RUNS_DIR": str(runs), "CHAOS_TEST_MARKER": marker,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    full_env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "run", "--worker-cmd", WORKER, "--worker-config",
                             str(config), "--runs", "2", "--json", *args], cwd=ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    victim = {"pid": 0}

    def breaker() -> None:
        if first_publish(f"{runs}/blackbox-*-{proc.pid}"):
            time.sleep(BREAK_AFTER_S)
            victim["pid"] = victim_pid or server_pid(proc.pid, record)
            os.kill(victim["pid"], sig)

    thread = threading.Thread(target=breaker, daemon=True)
    thread.start()
    try:
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    thread.join(5)
    assert victim["pid"], (f"nothing was broken (the CLI exited {proc.returncode} first); "
                           f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}")
    try:
        data = json.loads(stdout)
    except ValueError:
        raise AssertionError(f"stdout is not one JSON object:\n{stdout[:2000]}\nstderr:\n{stderr[-3000:]}") from None
    return Broken(proc.returncode, data, stderr, victim["pid"], marker, proc.pid)


def assert_rig_failure(out: Broken, component: str, problem: str) -> None:
    assert out.code == 2, out.stderr[-3000:]
    data = out.data
    assert data["verdict"] == "unknown"
    assert data["runs"] == 1, "no run after the one the rig broke in"
    assert len(data["rig_failures"]) == 1, data["rig_failures"]
    failure = data["rig_failures"][0]
    assert failure.startswith(f"run 0: {component}"), failure
    assert problem in failure.splitlines()[0], failure
    assert "log tail:" in failure
    assert any(reason.startswith(f"run 0: {component}") for reason in data["unknown_reasons"])
    assert data["per_run"][0]["rig_failures"] and data["run_dir"], "the run dir is kept: something to look at"
    assert "Traceback" not in out.stderr
    assert not marked_processes(out.marker)
    assert not glob.glob(f"{base_dir()}/bb-{out.pid}-*"), "the cluster dir was removed"


@pytest.mark.slow
@pytest.mark.parametrize("record, sig, problem", [
    ("proxy", signal.SIGKILL, "died: killed by SIGKILL"),
    ("postgres", signal.SIGKILL, "died: killed by SIGKILL"),
    ("redis-a", signal.SIGKILL, "died: killed by SIGKILL"),
    ("proxy", signal.SIGSTOP, "stopped (SIGSTOP)"),
], ids=["proxy-killed", "postgres-killed", "redis-primary-killed", "proxy-stopped"])
def test_a_broken_rig_ends_the_blackbox_run_unknown_naming_it(record, sig, problem, tmp_path, worker_config):
    out = run_breaking(tmp_path, worker_config, record, sig)
    name = COMPONENTS[record]
    assert_rig_failure(out, f"{name} (pid {out.victim})", problem)


@pytest.fixture
def staging(tmp_path):
    """Servers the external backend did not start: a native topology of this test's own,
    which the test breaks."""
    with breakable_cluster(f"rig-staging-{os.getpid()}-{uuid.uuid4().hex[:6]}") as cluster:
        yield cluster


@pytest.mark.slow
def test_an_external_endpoint_that_vanishes_ends_the_blackbox_run_unknown(staging, tmp_path, worker_config):
    env = {"CHAOS_REDIS_PRIMARY": str(staging.primary), "CHAOS_REDIS_REPLICA": str(staging.replica),
           "CHAOS_POSTGRES": str(staging.postgres), "TOXIPROXY_URL": staging.api.url, "CHAOS_EXTERNAL_WIPE": "yes"}
    out = run_breaking(tmp_path, worker_config, None, env=env, victim_pid=staging._procs["postgres"].pid,
                       args=["--backend", "external"])
    assert_rig_failure(out, "PostgreSQL [CHAOS_POSTGRES]", f"unreachable at {staging.postgres}")
    assert not any(name.startswith("bb-") for name in staging.api.proxies()), "its proxies were removed"


BLACKBOX_TEST = f'''
import glob, os, signal, threading, time
import pytest
from chaos.cluster.rundirs import runs_dir

@pytest.mark.blackbox(command="{WORKER}", config="worker.toml")
def test_rig_breaks(blackbox, cluster):
    pid = cluster._procs["postgres"].pid
    def breaker():
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if any(os.path.getsize(p) for p in glob.glob(f"{{runs_dir(cluster)}}/blackbox-*/history/P-order.jsonl")):
                time.sleep({BREAK_AFTER_S})
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)
    threading.Thread(target=breaker, daemon=True).start()
    blackbox()

def test_next_gets_a_healthy_topology(cluster):
    from chaos.cluster.health import rig_problems
    assert rig_problems(cluster, set(), deep=True) == []
    with cluster.pg_connect() as pg:
        assert pg.execute("SELECT 1").fetchone() == (1,)
'''


@pytest.mark.slow
def test_pytest_api_raises_rig_failure_and_the_next_test_gets_a_healthy_topology(tmp_path, worker_config):
    """The `blackbox` fixture in a child pytest (one process: the next test shares its topology)."""
    (tmp_path / "test_child.py").write_text(BLACKBOX_TEST)
    (tmp_path / "worker.toml").write_text(worker_config.read_text())
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["chaos.pytest_plugin", "chaos.pytest_plugin.aliases"]\n')
    # PYTEST_ADDOPTS stays: the root conftest puts the repository's `-p no:...` there (without
    # them this child imports hypothesis, anyio and pytest-benchmark: ~1.2 CPU s).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") or k == "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "-o", "addopts=", f"--rootdir={tmp_path}", str(tmp_path / "test_child.py")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    out = result.stdout + result.stderr
    assert "1 failed, 1 passed" in out, out[-4000:]
    assert f"{RigFailure.__module__}.RigFailure: the rig failed: run 0: PostgreSQL (pid" in out, out[-4000:]
    assert "died: killed by SIGKILL" in out
