"""Fixtures for the outbox tests: the outbox schema on the cluster, and real dispatcher processes.

Dispatchers are spawned as `python -m chaos.workload.worker SPEC.json` (worker role
`dispatcher`) on their own proxies (`cluster.worker_links`), so a test can cut one
dispatcher's link. They are SIGTERMed, then SIGKILLed, and their run dir removed at the end.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from chaos.cluster.spawner import spawn, stop
from chaos.history import read_history
from chaos.workload.dispatcher import ROLE
from chaos.workload.outbox import create_schema, unpublished_count
from faults.kill_dispatcher import process_stopped

REPO = Path(__file__).resolve().parents[2]


class Relay:
    """The dispatcher processes of one test and the run dir their histories go to."""

    def __init__(self, cluster, run_dir: Path) -> None:
        self.cluster, self.run_dir = cluster, run_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, n: int = 1, mode: str = "per-key", failpoints: dict | None = None,
              **config) -> list[subprocess.Popen]:
        """Start `n` dispatchers; `failpoints` maps a dispatcher name to its failpoint spec."""
        started = []
        for _ in range(n):
            name = f"dispatcher-{len(self.procs) + 1}"
            links = self.cluster.worker_links(name)
            spec = {"name": name, "role": ROLE, "run_dir": str(self.run_dir), "pg_dsn": links.pg_dsn,
                    "redis_url": links.redis_url, "time_scale": 1.0, "seed": 0,
                    "failpoints": (failpoints or {}).get(name, {}), "dispatcher": {"mode": mode, **config}}
            path = self.run_dir / f"{name}.json"
            path.write_text(json.dumps(spec))
            proc = spawn([sys.executable, "-m", "chaos.workload.worker", str(path)],
                         log=self.run_dir / f"{name}.log", cwd=REPO)
            self.procs.append(proc)
            started.append(proc)
        return started

    def history(self) -> list[dict]:
        return read_history(self.run_dir)

    def wait_started(self, count: int, timeout: float = 15.0) -> None:
        """Until `count` dispatchers wrote their start op (so a load meets all of them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.run_dir / "history").is_dir():
                if len({op["process"] for op in self.history() if op["f"] == "log"}) >= count:
                    return
            time.sleep(0.01)
        raise AssertionError(f"{count} dispatchers did not start within {timeout} s{self.logs()}")

    def drain(self, conn: psycopg.Connection, timeout: float = 15.0) -> float:
        """Until every outbox row is marked published; the seconds it took."""
        t0 = time.monotonic()
        while unpublished_count(conn):
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"outbox not drained after {timeout} s: "
                                     f"{unpublished_count(conn)} rows left{self.logs()}")
            time.sleep(0.01)
        return time.monotonic() - t0

    def wait_failpoint(self, process: str, name: str, timeout: float = 15.0) -> dict:
        """Until `process` stopped itself at failpoint `name` (action signal); its op."""
        marker = self.run_dir / "failpoints" / f"{process}.{name}"
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"{process} did not reach failpoint {name} in {timeout} s{self.logs()}")
            time.sleep(0.005)
        info = json.loads(marker.read_text())
        marker.unlink()
        return info

    def wait_failpoint_any(self, name: str, timeout: float = 15.0) -> dict:
        """Until some dispatcher stopped itself at failpoint `name`; its op (with `pid`)."""
        deadline = time.monotonic() + timeout
        directory = self.run_dir / "failpoints"
        while time.monotonic() < deadline:
            for marker in sorted(directory.glob(f"dispatcher-*.{name}")) if directory.is_dir() else []:
                return self.wait_failpoint(marker.name[: -len(name) - 1], name)
            time.sleep(0.005)
        raise AssertionError(f"no dispatcher reached failpoint {name} in {timeout} s{self.logs()}")

    def resume(self, proc: subprocess.Popen) -> None:
        """SIGCONT once the process really stopped: its failpoint writes the marker before it
        SIGSTOPs itself, and a SIGCONT sent in between would be lost."""
        deadline = time.monotonic() + 5
        while not process_stopped(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        proc.send_signal(signal.SIGCONT)

    def logs(self) -> str:
        return "".join(f"\n--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.run_dir.glob("*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # one stopped at a `signal` failpoint exits too
            stop(proc, signal.SIGTERM)


@pytest.fixture
def outbox_db(cluster) -> Iterator[psycopg.Connection]:
    """A direct connection to the cluster's empty database, with the outbox schema created."""
    with cluster.pg_connect() as conn:
        create_schema(conn)
        yield conn


@pytest.fixture
def relay(cluster, request) -> Iterator[Relay]:
    run_dir = Path(cluster.base_dir) / "runs" / f"outbox-{request.node.name}".replace("/", "_")[:120]
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    relay = Relay(cluster, run_dir)
    try:
        yield relay
    finally:
        relay.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
