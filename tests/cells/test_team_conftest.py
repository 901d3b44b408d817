"""The plugin as a team's project meets it, in a pytest session of its own directory: its
conftest's own ``cluster`` and ``postgres`` fixtures do not replace the framework's, its
``pytest_chaos_cell_finished`` hook is called once per cell, the ini twins of the
``--chaos-*`` options set the session, and the plugin's markers are registered."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = '''
import json, pytest

@pytest.fixture
def cluster():
    return "the team's own cluster"

@pytest.fixture
def postgres():
    return "the team's own database"

def pytest_chaos_cell_finished(cell, result):
    with open("finished.jsonl", "a") as out:
        out.write(json.dumps({"preset": cell.preset, "runs": len(result.result.runs),
                              "lost": result.row["lost"]}) + "\\n")
'''

TESTS = '''
import pytest

@pytest.mark.slow(seconds=20)
def test_a_cell_beside_the_teams_fixtures(chaos_cell, cluster, postgres):
    assert cluster == "the team's own cluster" and postgres == "the team's own database"
    chaos_cell("s1")

def test_the_teams_fixture_alone(cluster):
    assert cluster == "the team's own cluster"
'''

INI = '''
[pytest]
addopts = --strict-markers -p no:cacheprovider
chaos_runs = 2
chaos_time_scale = 0.5
chaos_summary = summary.json
'''


@pytest.mark.slow(seconds=4)
def test_a_teams_conftest_and_ini_drive_the_plugin(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_team.py").write_text(textwrap.dedent(TESTS))
    (tmp_path / "pytest.ini").write_text(textwrap.dedent(INI))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "chaos.pytest_plugin"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    finished = [json.loads(line) for line in (tmp_path / "finished.jsonl").read_text().splitlines()]
    assert [(f["preset"], f["runs"]) for f in finished] == [("s1", 2)], finished   # chaos_runs = 2 from the ini
    cells = json.loads((tmp_path / "summary.json").read_text())["cells"]             # chaos_summary from the ini
    assert [(c["preset"], c["runs"], c["match"]) for c in cells] == [("s1", 2, True)], cells


def test_a_bad_ini_value_is_a_usage_error_naming_the_key(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nchaos_runs = many\n")
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "chaos.pytest_plugin"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "ini chaos_runs = 'many'" in done.stderr and "--chaos-runs" in done.stderr, done.stderr
