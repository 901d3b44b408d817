"""The package as a team gets it: the wheel built from this tree, installed into a fresh venv
in a temp dir outside the checkout (no PYTHONPATH, no editable install).

* An unrelated one-test project run with the same venv before and after the install sees no
  change: the same output (but pytest's own `plugins:` line, which names every installed
  plugin) and the same Allure results (no environment.properties, no categories.json, the
  same labels).
* examples/team-project, which depends on the package and has fixtures named `cluster` and
  `postgres` of its own, passes its chaos tests with -n 2.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from install_helpers import ROOT, clean_env, make_venv, pip_install

pytestmark = pytest.mark.slow(seconds=22)
# The two tests that only read the shared venv are dispatched late (conftest.py orders by these
# figures), when the first test has built it: started beside it, each would wait for the build
# on an otherwise idle xdist worker (about 60 s each at -n 4).
READS_THE_BUILT_VENV = pytest.mark.slow(seconds=0.5)

TEAM = ROOT / "examples" / "team-project"
UNRELATED = "def test_adds():\n    assert 1 + 1 == 2\n"


def _run_unrelated(python: Path, workdir: Path) -> tuple[str, dict]:
    """Run the one-test project in a fresh copy; its output (timings and the plugins line
    dropped) and what its Allure results hold (file kinds, each result's name, status, labels)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir()
    (workdir / "test_unrelated.py").write_text(UNRELATED)
    done = subprocess.run([str(python), "-m", "pytest", "--alluredir", "ar", "-p", "no:randomly"], cwd=workdir,
                          env=clean_env(python.parent.parent), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = re.sub(r" in \d+\.\d+s", " in Ts", done.stdout)
    out = "\n".join(line for line in out.splitlines() if not line.startswith("plugins:"))
    files = sorted(re.sub(r"^[0-9a-f-]{36}", "UUID", p.name) for p in (workdir / "ar").iterdir())
    results = [json.loads(p.read_text()) for p in (workdir / "ar").glob("*-result.json")]
    seen = [(r["name"], r["status"], sorted((lab["name"], lab["value"]) for lab in r["labels"]
                                            if lab["name"] not in ("host", "thread"))) for r in results]
    return out, json.loads(json.dumps({"files": files, "results": seen}))   # as the shared build hands it back


@pytest.fixture(scope="module")
def team_venv(chaos_wheel, shared_once):
    """A fresh venv outside the checkout: the unrelated project run once with pytest and
    allure-pytest alone, then the wheel installed (and the team project, which depends on it).
    Built once per session (`shared_once`): each of the three tests here used to build its own
    on its own xdist worker, about 60 s each. Each test writes only in its own subdir
    (`unrelated` again, or the team project's run) and reads the venv."""
    def build(where: Path) -> dict:
        python = make_venv(where / "venv", "pytest>=8", "pytest-xdist>=3.5", "allure-pytest>=2.13", "setuptools>=61",
                           "wheel")
        before = _run_unrelated(python, where / "unrelated")
        team = where / "team-project"
        shutil.copytree(TEAM, team, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        # The wheel and the project in one pip command: the project's dependency on the package
        # is met by that wheel file (as after the README's two commands), one resolve instead of two.
        pip_install(python, "--no-build-isolation", str(chaos_wheel), str(team))
        return {"python": str(python), "where": str(where), "before": list(before)}

    built = shared_once("team-venv", build)
    return Path(built["python"]), Path(built["where"]), tuple(built["before"])


@READS_THE_BUILT_VENV
def test_an_unrelated_project_sees_no_change(team_venv):
    python, where, before = team_venv
    after = _run_unrelated(python, where / "unrelated")
    assert after[0] == before[0], f"output changed:\nBEFORE\n{before[0]}\nAFTER\n{after[0]}"
    assert after[1] == before[1]
    assert not {"environment.properties", "categories.json"} & set(after[1]["files"]), after[1]["files"]


@READS_THE_BUILT_VENV
def test_the_installed_package_is_the_wheel_not_the_checkout(team_venv):
    python, where, _ = team_venv
    code = ("import chaos, chaos.cluster.compose as c, pathlib; "
            "print(chaos.__file__); print(pathlib.Path(str(c.COMPOSE_FILE)).is_file())")
    done = subprocess.run([str(python), "-c", code], cwd=where, env=clean_env(python.parent.parent),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    location, compose_found = done.stdout.split()
    assert "site-packages" in location and not location.startswith(str(ROOT)), location
    assert compose_found == "True"      # the compose file is package data
    done = subprocess.run([str(where / "venv" / "bin" / "streams-chaos"), "--version"], capture_output=True,
                          text=True, timeout=120, env=clean_env(python.parent.parent))
    assert done.returncode == 0 and done.stdout.startswith("streams-chaos "), done.stdout + done.stderr


def test_the_team_project_passes_with_its_own_cluster_and_postgres_fixtures(team_venv):
    python, where, _ = team_venv
    team = where / "team-project"
    done = subprocess.run([str(python), "-m", "pytest", "-n", "2", "-q", "-p", "no:randomly"], cwd=team,
                          env=clean_env(python.parent.parent), capture_output=True, text=True, timeout=1200)
    out = done.stdout[-5000:] + done.stderr[-2000:]
    assert done.returncode == 0, out
    assert re.search(r"\b4 passed\b", done.stdout), out
    cells = json.loads((team / "chaos-summary.json").read_text())["cells"]   # chaos_summary from its pyproject
    assert ("ack-after", "kill-consumer", True) in [(c["preset"], c["fault"], c["match"]) for c in cells], cells
