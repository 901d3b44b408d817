"""The command line as a person meets it: help with no arguments, `--version`, and a reader
that closes the pipe early (`list --json | head`) ending the command quietly."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chaos

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _chaos(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=ENV)


def test_no_arguments_prints_the_help_and_exits_0():
    done = _chaos()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m chaos"), done.stdout[:300]
    for command in ("list", "describe", "run", "matrix", "cluster"):
        assert command in done.stdout
    assert done.stderr == ""


def test_version_is_the_package_version():
    done = _chaos("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"python -m chaos {chaos.__version__}"


def test_a_closed_pipe_is_a_quiet_exit():
    """The reader is gone before the first write: no `internal error`, no traceback, exit 141
    (what a shell reports for a tool that SIGPIPE ended)."""
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "list", "--json"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err


def test_the_console_script_is_declared_and_not_named_chaos():
    """Chaos Toolkit installs `chaos`; ours is `streams-chaos`, the same main as `python -m chaos`."""
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "chaos" not in scripts
    assert scripts == {"streams-chaos": "chaos.cli:main"}
