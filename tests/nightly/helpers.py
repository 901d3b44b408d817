"""Helpers of the nightly tests: pytest itself, run on this checkout, as CI runs it."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_pytest(*args: str, cwd: Path = ROOT, timeout: float = 600,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m pytest ARGS` in a child (extra `env`), this checkout first on the path; of
    PYTEST_ADDOPTS only the plugins kept out (`-p no:NAME`: see the root conftest)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("PYTEST_XDIST_WORKER", None)
    given = shlex.split(env.pop("PYTEST_ADDOPTS", ""))
    env["PYTEST_ADDOPTS"] = " ".join(f"-p {name}" for flag, name in zip(given, given[1:])
                                     if flag == "-p" and name.startswith("no:"))
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def collection(*args: str, env: dict[str, str] | None = None) -> tuple[list[str], str]:
    """Node ids `pytest --collect-only -q ARGS` selects, and its output (fails the test if
    collection fails)."""
    proc = run_pytest("--collect-only", "-q", *args, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")], proc.stdout


def collected_ids(*args: str, env: dict[str, str] | None = None) -> list[str]:
    """Node ids `pytest --collect-only -q ARGS` selects (fails the test if collection fails)."""
    return collection(*args, env=env)[0]
