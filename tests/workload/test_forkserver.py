"""The fork server: workers are real processes (own pid, real SIGKILL), and none outlives the
orchestrator, even when the orchestrator itself is SIGKILLed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

from chaos.workload.forkserver import fork_server

ROOT = Path(__file__).resolve().parents[2]


def _waiting_producer(run_dir: Path, name: str = "P-order") -> dict:
    """A producer spec that connects nowhere useful and then waits for its start signal forever."""
    return {"role": "producer", "name": name, "run_dir": str(run_dir), "redis_url": "redis://127.0.0.1:1/0",
            "pg_dsn": "", "time_scale": 1.0, "gate": True, "events": [],
            "producer": {"name": "direct", "params": {}}}


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def test_a_worker_is_a_real_process_and_a_real_sigkill_is_reported(tmp_path):
    server = fork_server()
    child = server.spawn(_waiting_producer(tmp_path), tmp_path / "p.log")
    proc = psutil.Process(child.pid)
    assert proc.ppid() == server._proc.pid and child.pid != os.getpid()
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready" / "P-order").exists():
        assert time.monotonic() < deadline, (tmp_path / "p.log").read_text()
        time.sleep(0.01)
    child.kill(signal.SIGKILL)
    assert child.wait(10) == -signal.SIGKILL and not child.alive()


def test_a_large_spec_reaches_the_worker_through_a_file_that_is_then_removed(tmp_path):
    """A producer's 10^5 events do not go through the server's pipe: the child reads them
    from a file next to its log (and removes it); the worker sees the same spec either way."""
    from chaos.workload.forkserver import SPEC_IN_FILE_BYTES
    events = [{"event_id": f"e{n}-1", "key": str(n), "etype": "created", "version": 1, "cost_ms": 0.0,
               "at_ms": 60_000.0, "producer": "P-order", "poison": False, "stream": "orders", "barrier": ""}
              for n in range(2000)]
    spec = {**_waiting_producer(tmp_path), "gate": False, "events": events}
    assert len(json.dumps(spec)) > SPEC_IN_FILE_BYTES
    server = fork_server()
    child = server.spawn(spec, tmp_path / "logs" / "p.log")
    try:
        deadline = time.monotonic() + 10
        started = tmp_path / "history" / "P-order.jsonl"
        while not started.exists() or b"started" not in started.read_bytes():
            assert time.monotonic() < deadline and child.alive(), (tmp_path / "logs" / "p.log").read_text()
            time.sleep(0.01)
        assert not list((tmp_path / "logs").glob("*.spec.json")), "the spec file was left behind"
        time.sleep(0.3)   # the first event is due in 60 s: still waiting, not crashed on its spec
        assert child.alive(), (tmp_path / "logs" / "p.log").read_text()
    finally:
        child.kill(signal.SIGKILL)
        child.wait(10)


def test_workers_die_with_a_sigkilled_orchestrator(tmp_path):
    script = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from chaos.workload.forkserver import fork_server
        spec = json.loads(sys.argv[1])
        server = fork_server()
        child = server.spawn(spec, Path(spec["run_dir"]) / "p.log")
        print(json.dumps({{"server": server._proc.pid, "worker": child.pid}}), flush=True)
        time.sleep(600)
    """)
    orchestrator = subprocess.Popen([sys.executable, "-c", script, json.dumps(_waiting_producer(tmp_path))],
                                    stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(orchestrator.stdout.readline())
        assert psutil.pid_exists(pids["worker"])
        orchestrator.kill()  # SIGKILL: no atexit, no cleanup code runs
        orchestrator.wait(10)
        assert _gone(pids["server"]), "the fork server outlived its orchestrator"
        assert _gone(pids["worker"]), "a worker outlived its orchestrator"
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
            orchestrator.wait()
