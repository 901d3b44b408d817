"""The rig vouches for itself (issue 14): a part of the framework killed or stopped mid-run gives
verdict `unknown` with that part named in rig_failures, leaves nothing running, and the next
cell on the same worker gets a healthy topology (rebuilt when needed) and ends as expected.

The break comes from a test-only fault (`BreakRig`) that declares no `takes_down`: for the
orchestrator it is something outside any configured fault's doing. It fires after `at_ms`
whatever the run does meanwhile, so a run that finished early is broken during its heal
phase and is still watched. Real processes, real SIGKILL/SIGSTOP.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar

import psutil
import pytest

from chaos.params import Param
from chaos.pytest_plugin.core import ready_topology
from chaos.run import run_cell
from chaos.workload.forkserver import fork_server
from faults.interface import Fault
from rig_helpers import wait_gone

WORKLOAD = {"workload": "many-orders:keys=100,events=5,cost_ms=2"}
SCALE = 0.5


class BreakRig(Fault):
    """Test-only: SIGKILL/SIGSTOP one rig component `at_ms` (scaled) into the workload."""

    name = "break-rig"
    description = "kill or stop a part of the rig (tests/rig only)"
    params = (Param("component", "proxy", "proxy | postgres | a | b | forkserver | connections"),
              Param("action", "kill", "kill | stop"),
              Param("at_ms", 200, "when"))
    broken: ClassVar[dict[str, int]] = {}

    def run(self, ctx: Any) -> None:
        time.sleep(ctx.scale(self.at_ms))      # not ctx.sleep: fire even when the run ended early
        sig = signal.SIGKILL if self.action == "kill" else signal.SIGSTOP
        if self.component == "forkserver":
            pid = fork_server()._proc.pid
        elif self.component == "connections":
            kill_orchestrator_connections(ctx.cluster)
            BreakRig.broken["connections"] = os.getpid()
            return
        else:
            pid = ctx.cluster._procs[self.component].pid
        BreakRig.broken[self.component] = pid
        os.kill(pid, sig)


def kill_orchestrator_connections(cluster: Any) -> None:
    """CLIENT KILL / pg_terminate_backend of this process's own connections to the primary and
    PostgreSQL (the workers reach both through the proxy server, so theirs are left alone)."""
    mine = psutil.Process().net_connections(kind="tcp")
    primary, pg = cluster.primary, cluster.postgres
    redis_ports = [c.laddr.port for c in mine if c.raddr and c.raddr.port == primary.port]
    pg_ports = [c.laddr.port for c in mine if c.raddr and c.raddr.port == pg.port]
    admin = cluster.direct_redis("primary")
    try:
        for port in redis_ports:
            try:
                admin.execute_command("CLIENT", "KILL", "ADDR", f"127.0.0.1:{port}")
            except Exception:  # noqa: BLE001 - the admin connection itself, or gone meanwhile
                pass
    finally:
        admin.close()
    with cluster.pg_connect() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY(%s)"
                     " AND pid <> pg_backend_pid()", (pg_ports,))
    assert redis_ports and pg_ports, (redis_ports, pg_ports)


def _pids(cluster: Any) -> list[int]:
    return [c.pid for c in cluster.components() if c.pid]


def _workers_left() -> list[int]:
    server = fork_server()
    return [p.pid for p in psutil.Process(server._proc.pid).children() if p.status() != psutil.STATUS_ZOMBIE]


def _who(pids: list[int]) -> str:
    """What each leftover child is: its status, age and open files (a worker's log is
    logs/<name>.log in its run dir), so a failure names the worker and its run."""
    lines = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                files = [f.path for f in p.open_files()]
                lines.append(f"pid {pid}: {p.status()}, {time.time() - p.create_time():.1f} s old, "
                             f"open files {files}")
        except psutil.Error as exc:
            lines.append(f"pid {pid}: {type(exc).__name__} (gone since)")
    return "; ".join(lines)


def _break(cluster: Any, component: str, action: str = "kill", at_ms: int = 200, run_root: Path | None = None):
    """One cell with `component` broken; its run dirs kept under `run_root` when given (the
    test removes them once it passed: a failure leaves the workers' logs to read)."""
    BreakRig.broken.clear()
    old = _pids(cluster)
    started = time.monotonic()
    result = run_cell(cluster, "s5", [BreakRig(component=component, action=action, at_ms=at_ms)], runs=2,
                      time_scale=SCALE, parts=WORKLOAD, keep_runs="always" if run_root else "never",
                      run_root=run_root)
    return result, old, time.monotonic() - started


def _assert_next_cell_is_healthy(cluster: Any, old_pids: list[int], rebuilt: bool) -> None:
    ready_topology(cluster)
    if rebuilt:
        assert wait_gone(old_pids, 10) == [], "a process of the old topology is still running"
    result = run_cell(cluster, "s5", [], runs=1, time_scale=SCALE, parts=WORKLOAD, keep_runs="never")
    assert result.verdict == "valid", (result.unknown_reasons, result.rig_failures)
    assert result.rig_failures == []


@pytest.mark.parametrize("component, action, name, rebuilt", [
    ("proxy", "kill", "proxy server", True),
    ("proxy", "stop", "proxy server", True),
    ("postgres", "kill", "PostgreSQL", True),
    ("a", "kill", "Redis node a (primary)", False),
    ("b", "kill", "Redis node b (replica)", False),
    ("forkserver", "kill", "worker fork server", False),
])
def test_a_broken_rig_part_makes_the_run_unknown_and_named(cluster, tmp_path, component, action, name, rebuilt):
    result, old, wall = _break(cluster, component, action, run_root=tmp_path / "cell")
    assert result.verdict == "unknown"
    assert len(result.runs) == 1, "a run on a broken rig ends the cell: the next runs would stand on it"
    run = result.runs[0]
    assert run.rig_failures, run.unknown_reasons
    assert run.rig_failures[0].startswith(name), run.rig_failures
    pid = BreakRig.broken[component]
    assert f"(pid {pid})" in run.rig_failures[0]
    assert "log tail:" in run.rig_failures[0]
    assert result.rig_failures[0].startswith(f"run 0: {name}")
    assert run.rig_failures[0] in run.unknown_reasons
    assert result.fault_errors == []
    assert len(run.rig_failures) == 1, f"only the broken part is named: {run.rig_failures}"
    unseen = [r for r in run.unknown_reasons if "unseen by the run" in r]
    assert unseen == [], f"the stop ended a worker no live handle stood for: {unseen}; run dir {result.run_dirs[0]}"
    left = _workers_left()
    assert left == [], (f"a worker is still running: {_who(left)}; the cell took {wall:.1f} s "
                        f"(older: not its own), its run dir: {result.run_dirs[0]}")
    shutil.rmtree(result.run_root)
    if action == "stop":
        assert psutil.Process(pid).status() == psutil.STATUS_STOPPED    # still stopped: the rebuild's to clear
    else:
        assert wait_gone([pid], 5) == []
    _assert_next_cell_is_healthy(cluster, old, rebuilt)


def test_the_orchestrators_own_connections_killed_are_reopened_and_the_verdict_stands(cluster):
    """Decided: CLIENT KILL / pg_terminate_backend of the orchestrator's own connections is no
    rig failure: its reads are idempotent, it reconnects, and the run is checked as usual."""
    result, _, _ = _break(cluster, "connections", at_ms=100)
    assert "connections" in BreakRig.broken, "the fault did not act"
    assert result.rig_failures == [], result.rig_failures
    assert result.verdict == "valid", result.unknown_reasons
    assert len(result.runs) == 2


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KB tmpfs as the run root (unmounted after); skipped where mount is not permitted."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_run_dir_disk_makes_the_run_unknown_and_named(cluster, full_disk):
    root = Path(full_disk) / "cell"
    result = run_cell(cluster, "s5", [], runs=1, time_scale=SCALE,
                      parts={"workload": "many-orders:keys=400,events=5,cost_ms=1"}, run_root=root,
                      keep_runs="never")
    assert result.verdict == "unknown"
    assert result.runs[0].rig_failures and result.runs[0].rig_failures[0].startswith("run dir"), \
        result.runs[0].unknown_reasons
    assert "No space left on device" in result.runs[0].rig_failures[0]
    assert _workers_left() == []
    _assert_next_cell_is_healthy(cluster, [], rebuilt=False)
