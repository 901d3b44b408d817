"""Replay is exact: every `reproduce` command (run, black-box run, matrix, Allure, pytest
summary) carries every option that shaped the cell, so running it gives the same cell.

Each test takes the command the framework printed, runs it as a user would (adding only
`--json` and `--run-dir`, which shape nothing), and compares: the replay's own reproduce
command is the same (the options round-trip, the topology included), and so are the
cell's parameters and the figures that do not depend on timing.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.replay import blackbox_command, reproduce_command

ROOT = Path(__file__).resolve().parents[2]
SAME = ("preset", "fault", "runs", "seed", "time_scale", "published", "lost", "wrong_final_state_runs", "verdict")


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("CHAOS_TOPOLOGY", "CHAOS_SERVER", "CHAOS_BACKEND")
             and not k.startswith("PYTEST_XDIST")}
    return {**clean, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def chaos(argv: list[str], tmp_path: Path, timeout: float = 400) -> dict:
    done = subprocess.run([sys.executable, "-m", "chaos", *argv, "--json", "--run-dir", str(tmp_path / "runs")],
                          cwd=ROOT, env=env(), capture_output=True, text=True, timeout=timeout)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def replay(command: str, tmp_path: Path) -> dict:
    argv = shlex.split(command)
    assert argv[:4] == ["python", "-m", "chaos", "run"], command
    return chaos(argv[3:], tmp_path)


def final_states(data: dict) -> list[dict]:
    return [r["final_state"] for r in data["per_run"]]


def small_cas(tmp_path: Path) -> Path:
    """The CAS example on 20 keys, its schema by absolute path: valid and the same every run."""
    text = (ROOT / "examples/redis_py_cas.toml").read_text()
    text = text.replace('schema = "orders_schema.sql"', f'schema = "{ROOT / "examples/orders_schema.sql"}"')
    path = tmp_path / "cas.toml"
    path.write_text(text.replace("keys = 100", "keys = 20"))
    return path


def test_every_option_is_written_out_and_none_is_taken_from_the_shell(monkeypatch) -> None:
    for name in ("CHAOS_TOPOLOGY", "CHAOS_SERVER", "CHAOS_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    assert reproduce_command("s2:shards=4", ["kill-consumer:at_ms=5"], {"workload": "many-orders:keys=4"}, 3, 7,
                             0.5) == ("python -m chaos run --preset s2:shards=4 --fault kill-consumer:at_ms=5 "
                                      "--part workload=many-orders:keys=4 --runs 3 --seed 7 --time-scale 0.5 "
                                      "--backend native --topology replica")
    monkeypatch.setenv("CHAOS_TOPOLOGY", "sentinel:quorum=9")    # the shell's are never read: values are passed
    monkeypatch.setenv("CHAOS_SERVER", "redis")
    assert "--topology replica" in reproduce_command("s1", [], {}, 1, 0, 1.0)
    assert blackbox_command("python -m w --x 'a b'", "w.toml", ["none"], 2, 0, 1.0, "compose",
                            topology="sentinel:quorum=2", server="valkey") == (
        "python -m chaos run --worker-cmd 'python -m w --x '\"'\"'a b'\"'\"'' --worker-config w.toml --runs 2 --seed 0 "
        "--time-scale 1 --backend compose --topology sentinel:quorum=2 --server valkey")


@pytest.mark.slow(seconds=4)
def test_a_preset_run_replays_from_its_reproduce_command(tmp_path) -> None:
    first = chaos(["run", "--preset", "s1", "--runs", "1", "--seed", "5", "--time-scale", "0.5"], tmp_path)
    again = replay(first["reproduce"], tmp_path)
    assert again["reproduce"] == first["reproduce"]
    assert {k: again[k] for k in SAME} == {k: first[k] for k in SAME}
    assert final_states(again) == final_states(first)


@pytest.mark.slow(seconds=7)
def test_a_black_box_run_on_the_sentinel_topology_replays_on_it(tmp_path) -> None:
    """The issue's case: the replay of a `--topology sentinel` run used to run on the replica topology."""
    first = chaos(["run", "--topology", "sentinel", "--worker-cmd", "python -m examples.redis_py_cas",
                   "--worker-config", str(small_cas(tmp_path)), "--runs", "1", "--seed", "3"], tmp_path)
    assert "--topology sentinel" in first["reproduce"], first["reproduce"]
    again = replay(first["reproduce"], tmp_path)
    assert again["reproduce"] == first["reproduce"]
    assert {k: again[k] for k in SAME} == {k: first[k] for k in SAME}
    assert again["verdict"] == "valid" and final_states(again) == final_states(first)


@pytest.mark.slow(seconds=4)
def test_a_matrix_cell_replays_from_its_reproduce_command(tmp_path) -> None:
    matrix = chaos(["matrix", "--area", "ordering", "--presets", "s1", "--faults", "none", "--runs", "1",
                    "--seed", "9", "--time-scale", "0.5"], tmp_path)
    cell = matrix["cells"][0]
    again = replay(cell["reproduce"], tmp_path)
    assert again["reproduce"] == cell["reproduce"]
    assert (again["preset"], again["runs"], again["seed"], again["verdict"]) == (
        cell["preset"], cell["runs"], cell["seed"], cell["verdict"])
    assert (again["lost"], again["wrong_final_state_runs"]) == (cell["lost"], cell["wrong_final_state_runs"])


SCENARIO = '''
import pytest

@pytest.mark.blackbox(command="python -m examples.redis_py_cas", config="{config}")
def test_cas(blackbox):
    blackbox(runs=1)

def test_s1(chaos_cell):
    chaos_cell("s1", runs=1)
'''


@pytest.mark.slow(seconds=11)
def test_allure_and_summary_cells_replay_from_their_reproduce_commands(tmp_path) -> None:
    """A pytest session with a built-in and a black-box cell: the summary row and Allure's
    cell.json give the same command, and it replays the same cell."""
    test = tmp_path / "test_two_cells.py"
    test.write_text(SCENARIO.format(config=small_cas(tmp_path)))
    summary, results = tmp_path / "summary.json", tmp_path / "allure"
    done = subprocess.run([sys.executable, "-m", "pytest", str(test), "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                           f"--basetemp={tmp_path / 'bt'}", "--chaos-seed", "21", "--chaos-time-scale", "0.5",
                           f"--chaos-summary={summary}", f"--alluredir={results}"],
                          cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(summary.read_text())["cells"]
    assert len(rows) == 2 and all(r["reproduce"] for r in rows), rows
    allure = {}
    for result in results.glob("*-result.json"):
        data = json.loads(result.read_text())
        for attachment in data.get("attachments", []):
            if attachment["name"] == "cell.json":
                allure[data["name"]] = json.loads((results / attachment["source"]).read_text())["reproduce"]
    assert sorted(allure.values()) == sorted(r["reproduce"] for r in rows), (allure, rows)
    for row in rows:
        assert "--seed 21" in row["reproduce"] and "--time-scale 0.5" in row["reproduce"]
        again = replay(row["reproduce"], tmp_path)
        assert again["reproduce"] == row["reproduce"]
        assert (again["runs"], again["seed"], again["verdict"], again["lost"], again["wrong_final_state_runs"]) == (
            row["runs"], 21, row["verdict"], row["lost"], row["wrong_final_state_runs"])
