"""report_cell through a real allure-pytest session: what lands in the results dir."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chaos.checker import FinalState, check_run, summarize
from chaos.report.allure_cell import allure_active, bounded, chosen_runs, report_cell, severity

REPO = Path(__file__).resolve().parents[2]

# A cell of two runs built from real history files: run 0 applies created then paid (valid),
# run 1 applies them the other way round (a wrong final state), with the phases the
# orchestrator's phase clock records attached.
INNER = textwrap.dedent('''
    import time
    from dataclasses import dataclass
    from pathlib import Path

    from chaos.checker import FinalState, check_run, summarize
    from chaos.expectations.table import Expectation
    from chaos.history import HistoryWriter, read_history
    from chaos.report.allure_cell import report_cell

    try:
        from chaos.run import Phase
    except ImportError:
        @dataclass(frozen=True)
        class Phase:
            run: int
            name: str
            start: float
            end: float

    CREATED = dict(event_id="e42-1", key="42", version=1, etype="created")
    PAID = dict(event_id="e42-2", key="42", version=2, etype="paid")

    def make_cell(tmp_path):
        results, dirs, phases = [], [], []
        t = time.monotonic() - 10
        for i, wrong in enumerate([False, True]):
            run_dir = tmp_path / f"run-{i}"
            with HistoryWriter.for_run(run_dir, "nemesis") as w:
                w.op("info", "fault", value={"name": "latency", "phase": "start"})
            with HistoryWriter.for_run(run_dir, "C1") as w:
                for ev, entry in ((PAID, "2-0"), (CREATED, "1-0")) if wrong else ((CREATED, "1-0"), (PAID, "2-0")):
                    w.op("ok", "publish", **ev, entry_id=entry, stream="orders")
                    w.op("ok", "apply", **ev, rows=1, effect="applied")
            dirs.append(run_dir)
            row = {"42": {"status": "created", "version": 1} if wrong else {"status": "paid", "version": 2}}
            results.append(check_run(read_history(run_dir), FinalState(rows=row), run=i, seed=100 + i))
            for name, length in (("reset", 0.1), ("arm", 0.05), ("workload", 1.0), ("drain", 0.2), ("check", 0.01)):
                phases.append(Phase(i, name, t, t + length))
                t += length
            phases.append(Phase(i, "fault:latency", t - 1.2, t - 0.4))
        cell = summarize(results)
        cell.run_dirs, cell.phases, cell.notes = dirs, phases, ["latency fired after the workload ended"]
        return cell

    import pytest

    @pytest.mark.parametrize("case", [{"preset": "s1", "bounds": {"lost": 0}}])
    def test_failover_cell(tmp_path, case):
        cell = make_cell(tmp_path)
        report_cell(cell, area="ordering", preset="s1:paid_at_ms=300", fault="latency:latency_ms=5",
                    parts={"workload": "many-orders:keys=2"}, runs=2, seed=100, time_scale=0.5,
                    expected=Expectation.of(wrong_final_state_runs=0))

    def test_two_cells(tmp_path):
        for preset in ("s1", "s5"):
            cell = make_cell(tmp_path / preset)
            report_cell(cell, area="failover", preset=preset, fault="none", parts={}, runs=2, seed=100,
                        time_scale=1.0, expected=None)
''')


def inner_session(folder: Path, seed: int) -> str:
    """Run the inner session (its cells seeded `seed`); its Allure results dir."""
    results = folder / f"results-{seed}"
    (folder / "test_inner.py").write_text(INNER.replace("seed=100,", f"seed={seed},"))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"--alluredir={results}", "test_inner.py"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return str(results)


def read_inner(results: Path) -> dict:
    found = {r["name"]: r for r in (json.loads(p.read_text()) for p in results.glob("*-result.json"))}
    single = next(r for name, r in found.items() if "latency" in name)
    single["_dir"], single["_all"] = results, found
    return single


@pytest.fixture
def seed_100(shared_once) -> dict:
    """The inner session with seed 100, run once for every test here that reads it (under
    xdist too): a nested session costs seconds, its results are only read."""
    return read_inner(Path(shared_once("allure-cell-seed-100", lambda folder: inner_session(folder, 100))))


def test_labels_parameters_steps_and_attachments(seed_100):
    result = seed_100
    labels = {(lab["name"], lab["value"]) for lab in result["labels"]}
    assert {("epic", "ordering"), ("feature", "s1"), ("story", "latency"), ("severity", "critical")} <= labels
    params = {p["name"]: p for p in result["parameters"]}
    assert params["preset"]["value"] == "s1:paid_at_ms=300"
    assert params["part workload"]["value"] == "many-orders:keys=2"
    assert params["case"]["mode"] == "hidden"  # the test's own pytest parameter
    assert params["seed"].get("excluded") is True and not params["runs"].get("excluded")
    assert result["name"] == "s1:paid_at_ms=300 x latency:latency_ms=5 [workload=many-orders:keys=2]"

    runs = result["steps"]
    assert [s["status"] for s in runs] == ["passed", "failed"]  # the cell left its expectation
    assert runs[1]["name"].startswith("run 1 (seed 101): invalid")
    phases = [s["name"] for s in runs[0]["steps"]]
    assert phases[:3] == ["reset", "arm", "workload"] and "fault:latency" in phases
    workload = runs[0]["steps"][2]
    assert workload["stop"] - workload["start"] == pytest.approx(1000, abs=2)
    assert runs[0]["start"] <= workload["start"] and runs[0]["stop"] >= workload["stop"]

    files = {a["name"]: result["_dir"] / a["source"] for a in result["attachments"]}
    assert list(files)[0] == "cell.json"
    cell = json.loads(files["cell.json"].read_text())
    assert (cell["area"], cell["verdict"], cell["wrong_final_state_runs"]) == ("ordering", "invalid", 1)
    assert cell["matches_expectation"] is False and cell["notes"] == ["latency fired after the workload ended"]
    assert cell["reproduce"].startswith("python -m chaos run --preset s1:paid_at_ms=300 --fault latency:latency_ms=5")
    # the invalid run first, then run 0; each with its trace, history and timeline
    assert [n for n in files if n.endswith("timeline.png")] == ["run 1 (invalid) timeline.png",
                                                                 "run 0 (valid) timeline.png"]
    assert files["run 1 (invalid) timeline.png"].read_bytes().startswith(b"\x89PNG")
    assert "apply" in files["run 1 (invalid) history.txt"].read_text()
    assert files["run 1 (invalid) trace.txt"].read_text().strip()
    assert "does not match its expectation" in result["description"]
    assert "Note: latency fired after the workload ended" in result["description"]


def test_a_test_with_two_cells_reports_the_second_in_a_step_of_its_own(seed_100):
    (both,) = [r for name, r in seed_100["_all"].items() if "latency" not in name]
    assert both["name"] == "s1 x none + s5 x none"
    assert [lab["value"] for lab in both["labels"] if lab["name"] == "feature"] == ["s1"]
    params = {p["name"]: p["value"] for p in both["parameters"]}
    assert (params["preset"], params["preset (cell 2)"]) == ("s1", "s5")
    steps = [s["name"] for s in both["steps"]]
    assert steps[:2] == ["run 0 (seed 100): valid; lost 0, duplicated 0, reordered 0",
                         "run 1 (seed 101): invalid; lost 0, duplicated 0, reordered 1"]
    (second,) = [s for s in both["steps"] if s["name"] == "cell 2: s5 x none"]
    assert [a["name"] for a in second["attachments"]][0] == "cell.json" and len(second["steps"]) == 2
    assert [a["name"] for a in both["attachments"]][0] == "cell.json"
    assert "**s1 x none**" in both["description"] and "**s5 x none**" in both["description"]


def test_history_id_does_not_depend_on_the_seed(seed_100, tmp_path):
    assert seed_100["historyId"] == read_inner(Path(inner_session(tmp_path, seed=7)))["historyId"]


def _cell(lost: bool, wrong: bool = False):
    ops, t = [], 1000.0
    for ev in (dict(event_id="e1", key="1", version=1, etype="created"),):
        for typ, f in (("invoke", "publish"), ("ok", "publish")):
            t += 0.001
            ops.append({"time": t, "process": "P", "type": typ, "f": f, **ev, "entry_id": "1-0"})
        if not lost:
            t += 0.001
            ops.append({"time": t, "process": "C1", "type": "ok", "f": "apply", **ev, "rows": 1, "effect": "applied"})
    rows = {} if lost else {"1": {"status": "created", "version": 1}}
    return summarize([check_run(ops, FinalState(rows=rows))])


def test_severity_follows_the_worst_anomaly():
    assert severity(_cell(lost=True)) == "blocker"
    assert severity(_cell(lost=False)) == "minor"


def test_no_op_without_allure(tmp_path):
    if allure_active():
        pytest.skip("this session reports to Allure")
    cell = _cell(lost=False)
    report_cell(cell, area="a", preset="p", fault="none", parts={}, runs=1, seed=0, time_scale=1.0, expected=None)
    assert chosen_runs(cell) == [0]


def test_long_texts_keep_their_first_and_last_lines():
    text = "".join(f"line {i}\n" for i in range(100_000))
    cut = bounded(text, Path("/runs/run-0"), limit=10_000)
    assert len(cut) < 10_200 and cut.startswith("line 0\n") and cut.endswith("line 99999\n")
    (note,) = [line for line in cut.splitlines() if "left out" in line]
    kept = len(cut.splitlines()) - 1
    assert note == f"... {100_000 - kept} lines left out; the whole history is in /runs/run-0/history while the run dir is kept ..."
    assert bounded("short\n") == "short\n"


def test_the_description_names_a_stopped_consumer_and_its_stall():
    from chaos.report.allure_cell import _description
    obj = {"verdict": "invalid", "runs": 1, "published": 389, "undelivered": 286, "expected": None,
           "anomaly_counts": {"stopped-consuming": 286}, "stalled_after_heal_s": 16.2}
    text = _description(obj)
    assert "undelivered 286" in text and "**stopped consuming 286** (no progress for 16.2 s" in text
    assert "stopped consuming" not in _description({**obj, "anomaly_counts": {}})
