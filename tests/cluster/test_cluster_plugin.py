"""The plugin's options: validated at start, and the same on every xdist worker."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).parent / "scenarios" / "scenario_options.py"


def child(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYTEST_XDIST")}
    env["CHAOS_SCENARIO_OUT"] = str(tmp_path)
    return subprocess.run([sys.executable, "-m", "pytest", str(SCENARIO), "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'bt'}", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


def test_every_xdist_worker_gets_the_controllers_drawn_seed(tmp_path):
    result = child(tmp_path, "-n", "2", "--dist", "each", "--chaos-time-scale", "0.5", "--chaos-runs", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    options = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("gw*.json"))]
    assert len(options) == 2 and options[0] == options[1]
    assert options[0]["time_scale"] == 0.5 and options[0]["runs"] == 3 and options[0]["backend"] == "native"
    assert f"--chaos-seed={options[0]['seed']}" in result.stdout      # the header says how to replay


def test_a_given_seed_is_used(tmp_path):
    result = child(tmp_path, "--chaos-seed", "1234")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "master.json").read_text())["seed"] == 1234


@pytest.mark.parametrize("args, message", [
    (["--chaos-time-scale", "0"], "--chaos-time-scale=0.0: give a positive factor"),
    (["--chaos-runs", "0"], "--chaos-runs=0: give a run count of 1 or more"),
])
def test_bad_options_are_usage_errors_naming_the_fix(tmp_path, args, message):
    result = child(tmp_path, "--co", *args)
    assert result.returncode == 4 and message in result.stderr
