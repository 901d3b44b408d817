"""Fixtures for the topology's own tests."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from childrun import ROOT, SCENARIO, ChildRun


@pytest.fixture
def private_base():
    """A cluster base dir of our own (0755, as PostgreSQL needs), so no concurrent start sweeps it."""
    path = Path(tempfile.mkdtemp(prefix="chaos-test-base-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def child_pytest(tmp_path):
    """Start a child pytest on the scenario file; it is killed at teardown whatever happens."""
    runs: list[ChildRun] = []

    def start(mode: str, *args: str, workers: int = 0, env: dict[str, str] | None = None) -> ChildRun:
        out = tmp_path / f"out-{len(runs)}"
        out.mkdir()
        env = dict(os.environ, CHAOS_SCENARIO=mode, CHAOS_SCENARIO_OUT=str(out),
                   CHAOS_SCENARIO_WORKERS=str(workers or 1), **(env or {}))
        env.pop("PYTEST_XDIST_WORKER", None)
        env.pop("PYTEST_XDIST_WORKER_COUNT", None)
        argv = [sys.executable, "-m", "pytest", str(SCENARIO), "-q", "-p", "no:cacheprovider",
                f"--basetemp={tmp_path / f'basetemp-{len(runs)}'}", *args]
        if workers:
            argv += ["-n", str(workers), "--dist", "each"]   # every worker runs the scenario
        # SIGINT at its default, as in a terminal: a shell's background job (`cmd &`, a CI
        # script's) starts with it ignored, its children inherit that, and Ctrl-C would do nothing
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        runs.append(ChildRun(proc, out))
        return runs[-1]

    yield start
    for run in runs:
        if run.proc.poll() is None:
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait()
