"""The results dir of a real pytest session: environment.properties, categories, bad dirs."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chaos.pytest_plugin.allure_results import properties_text
from chaos.report.categories import CATEGORIES

REPO = Path(__file__).resolve().parents[2]


def pytest_run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_inner.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def read_properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_environment_and_categories_from_an_xdist_session_with_a_cluster(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "notes.txt").write_text("left here by hand")
    proc = pytest_run(tmp_path, """
        def test_uses_the_cluster(chaos_reset_cluster):
            assert chaos_reset_cluster.direct_redis().ping()
    """, "-n", "1", f"--alluredir={results}", "--chaos-seed=4242", "--chaos-time-scale=0.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = read_properties(results / "environment.properties")
    assert env["redis.server"] in ("redis", "valkey")
    assert re.fullmatch(r"\d+\.\d+\.\d+", env["redis.version"]), env
    assert re.fullmatch(r"\d+(\.\d+)*.*", env["postgresql.version"]), env
    assert "API version" in env["proxy"], env
    assert (env["seed"], env["time_scale"], env["backend"]) == ("4242", "0.5", "native")
    assert env["topology"] == os.environ.get("CHAOS_TOPOLOGY", "replica")
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", env["git.revision"]), env
    assert json.loads((results / "categories.json").read_text()) == CATEGORIES
    assert "1 file(s) in" in proc.stdout and "notes.txt" in proc.stdout and "--clean-alluredir" in proc.stdout
    assert list(results.glob("*-result.json"))  # the results themselves were written


def test_a_test_without_a_cell_is_filed_under_its_directory_and_module(tmp_path):
    results = tmp_path / "results"
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_plain.py").write_text("def test_plain():\n    assert False\n")
    proc = pytest_run(tmp_path, "def test_top():\n    pass\n", f"--alluredir={results}", "--chaos-allure-tree",
                      "tests/unit")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = {r["name"]: r for r in (json.loads(p.read_text()) for p in results.glob("*-result.json"))}
    labels = {(lab["name"], lab["value"]) for lab in found["test_plain"]["labels"]}
    assert {("epic", "tests/unit"), ("feature", "test_plain.py")} <= labels and found["test_plain"]["status"] == "failed"
    labels = {(lab["name"], lab["value"]) for lab in found["test_top"]["labels"]}
    assert ("epic", tmp_path.name) in labels


THEIRS = [{"name": "Product defects", "matchedStatuses": ["failed"]}, {"name": CATEGORIES[0]["name"]}]


@pytest.fixture
def two_sessions(shared_once) -> dict:
    """Two sessions into one results dir that holds the project's own categories.json, run once
    for the three tests that read them (each a pytest process; the second starts a topology):
    first a session that uses no chaos fixture, then, its results aged, one that starts a topology."""
    def build(folder: Path) -> dict:
        results = folder / "results"
        results.mkdir()
        (results / "categories.json").write_text(json.dumps(THEIRS))
        plain = pytest_run(folder, "def test_plain():\n    pass\n", f"--alluredir={results}")
        seen = {"plain": {"returncode": plain.returncode, "out": plain.stdout + plain.stderr,
                          "environment": (results / "environment.properties").exists(),
                          "categories": json.loads((results / "categories.json").read_text()),
                          "results": [json.loads(p.read_text()) for p in results.glob("*-result.json")]}}
        for path in results.glob("*-result.json"):
            os.utime(path, (1, 1))
        chaos = pytest_run(folder, "def test_uses_the_cluster(chaos_cluster):\n    pass\n", f"--alluredir={results}")
        seen["chaos"] = {"returncode": chaos.returncode, "out": chaos.stdout + chaos.stderr,
                         "categories": json.loads((results / "categories.json").read_text())}
        return seen
    return shared_once("pytest-allure-two-sessions", build)


def test_results_from_an_earlier_session_are_pointed_out(two_sessions):
    proc = two_sessions["chaos"]
    assert re.search(r"allure: \d+ result\(s\) in .* earlier session", proc["out"]), proc["out"]


def test_a_session_that_uses_no_chaos_fixture_is_left_alone(two_sessions):
    """The plugin is installed but the session does not use it: no header line, no labels on
    its tests, nothing of ours in its results, and its own categories.json untouched."""
    proc = two_sessions["plain"]
    assert proc["returncode"] == 0, proc["out"]
    assert "chaos" not in proc["out"], proc["out"]
    assert not proc["environment"]
    assert proc["categories"] == THEIRS
    (result,) = proc["results"]
    assert not {lab["name"] for lab in result["labels"]} & {"epic", "feature", "story"}, result["labels"]


def test_the_chaos_categories_are_merged_into_a_projects_own(two_sessions):
    """A session that ran a topology puts the chaos categories first and keeps the project's
    own after them (one of the same name as ours is replaced)."""
    proc = two_sessions["chaos"]
    assert proc["returncode"] == 0, proc["out"]
    assert proc["categories"] == [*CATEGORIES, THEIRS[0]]


def test_an_unwritable_alluredir_is_refused_before_the_tests_run(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = pytest_run(tmp_path, "def test_x():\n    open('ran', 'w').close()\n", f"--alluredir={blocker}/results")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "cannot write there" in proc.stderr and "--alluredir reports/allure-results" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "ran").exists()


def test_properties_are_escaped():
    text = properties_text({"a key": "C:\\dir\nnext", "k=v": "x=y"})
    assert text == "a\\ key=C:\\\\dir\\nnext\nk\\=v=x=y\n"
