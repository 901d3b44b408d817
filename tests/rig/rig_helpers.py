"""Helpers for the rig-failure tests: find a component among a process's descendants, break it
at a chosen time, and check that nothing of a run is left."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]

# how each component shows in `ps` among the CLI's descendants
MATCHERS = {
    "proxy server": lambda cmd: "chaos.proxy" in cmd and "serve" in cmd,
    "PostgreSQL": lambda cmd: bool(cmd) and cmd[0].endswith("/postgres") and "-D" in cmd,
    "Redis server": lambda cmd: bool(cmd) and ("redis-server" in cmd[0] or "valkey-server" in cmd[0])
    and "--sentinel" not in cmd,
    "worker fork server": lambda cmd: "chaos.workload.forkserver" in cmd,
}


def find_process(root_pid: int, component: str, timeout: float = 30.0) -> psutil.Process:
    """The descendant of ``root_pid`` that runs ``component`` (the first found)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for proc in psutil.Process(root_pid).children(recursive=True):
                try:
                    cmd = proc.cmdline()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if MATCHERS[component](cmd):
                    return proc
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    raise AssertionError(f"no {component} process under pid {root_pid} within {timeout} s")


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The pids of ``pids`` still alive (not zombies) after ``timeout``."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if _alive(p)]
        time.sleep(0.05)
    return left


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class CliRun:
    """`python -m chaos run ... --json` in a subprocess, one component broken mid-run."""

    code: int
    out: dict
    stderr: str
    wall_s: float
    broken_pid: int
    seen_pids: list[int] = field(default_factory=list)
    broken_at_s: float = 0.0      # from the CLI's start; wall_s - broken_at_s: how long it took to end


def run_cli_breaking(component: str, args: list[str], *, after_s: float, sig: int = signal.SIGKILL,
                     timeout: float = 120.0, run_dir: Path | None = None) -> CliRun:
    """Start the CLI, wait until its run's workers exist (the fork server's first worker), then
    ``after_s`` later send ``sig`` to ``component``; return the outcome."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if run_dir is not None:
        env["CHAOS_RUNS_DIR"] = str(run_dir)
    argv = [sys.executable, "-m", "chaos", "run", *args, "--json"]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                            start_new_session=True)
    seen: set[int] = set()
    broken: dict[str, float] = {"pid": 0, "at": 0.0}

    def breaker() -> None:
        try:
            forks = find_process(proc.pid, "worker fork server", timeout)
            deadline = time.monotonic() + timeout
            while not forks.children() and time.monotonic() < deadline:   # the run's first worker
                time.sleep(0.01)
            time.sleep(after_s)
            victim = find_process(proc.pid, component, 5)
            seen.update(p.pid for p in descendants(proc.pid))
            broken["pid"] = victim.pid
            os.kill(victim.pid, sig)
            broken["at"] = time.monotonic() - started
        except (AssertionError, psutil.Error, ProcessLookupError):
            pass

    thread = threading.Thread(target=breaker, daemon=True)
    thread.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the CLI run did not end within {timeout} s; stderr:\n{stderr.decode()[-3000:]}")
    finally:
        if broken["pid"] and sig == signal.SIGSTOP:
            try:
                os.kill(broken["pid"], signal.SIGCONT)
            except ProcessLookupError:
                pass
    wall = time.monotonic() - started
    thread.join(5)
    text = stdout.decode()
    try:
        out = json.loads(text) if text.strip() else {}
    except ValueError:
        raise AssertionError(f"stdout is not one JSON object:\n{text[:2000]}\nstderr:\n{stderr.decode()[-3000:]}")
    return CliRun(proc.returncode, out, stderr.decode(), wall, int(broken["pid"]), sorted(seen), broken["at"])


def marked_processes(marker: str) -> list[str]:
    """Live processes (zombies aside) that inherited CHAOS_TEST_MARKER=marker: what a run
    started and left behind."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.environ().get("CHAOS_TEST_MARKER") == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])}")
        except (psutil.Error, OSError):
            continue
    return found


@contextmanager
def breakable_cluster(name: str, start: Callable[[str], Any] | None = None) -> Iterator[Any]:
    """A native topology of the test's own (`start(name)`, default NativeCluster.start), which
    the test breaks: on the way out, whatever it SIGSTOPped is resumed before it is closed."""
    from chaos.cluster.native import NativeCluster
    cluster = (start or NativeCluster.start)(name)
    try:
        yield cluster
    finally:
        for proc in cluster._procs.values():
            if proc.alive():
                os.kill(proc.pid, signal.SIGCONT)
        cluster.close()
