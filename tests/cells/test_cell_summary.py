"""The per-cell summary of a real small suite, run as a child pytest with and without xdist:
the terminal table's rows, the --chaos-summary JSON, what a bad summary path does, and a
cell whose rig breaks mid-run (the cluster's own proxy server SIGKILLed by a test-only fault
that may take nothing down): broken by RigFailure, not failed by a mismatch, in the
terminal, the summary and Allure; the next test on the same worker runs on a healthy
topology; nothing is left running."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from chaos.expectations.ordering import PAID_FIRST
from chaos.report.rows import ROW_KEYS

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).parent / "scenarios" / "cells_scenario.py"


@pytest.fixture
def private_base():
    """A cluster base of our own (0755 for PostgreSQL): kept run dirs land here, not in the shared one."""
    path = Path(tempfile.mkdtemp(prefix="chaos-cells-base-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# The summary is about cells, rows and run dirs, not timings: the scenario's cells (s1 and baseline's
# forced race, whose outcomes hold at any time scale) run at 0.25, created's 800 ms job at 200 ms.
SCENARIO_TIME_SCALE = "0.25"


def child(tmp_path: Path, base: Path, mode: str, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess:
    out = tmp_path / f"out-{mode}-{len(list(tmp_path.glob('out-*')))}"
    out.mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    environ.update(CHAOS_CELLS_MODE=mode, CHAOS_SCENARIO_OUT=str(out), CHAOS_CLUSTER_BASE=str(base), **(env or {}))
    run = subprocess.run([sys.executable, "-m", "pytest", str(SCENARIO), "-p", "no:cacheprovider",
                          f"--basetemp={out / 'bt'}", *args], cwd=ROOT, env=environ,
                         capture_output=True, text=True, timeout=600)
    run.out = out  # type: ignore[attr-defined]
    return run


def table(stdout: str) -> list[list[str]]:
    """The rows of the chaos cells table (header first), split on runs of two spaces."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "chaos cells:" in line)
    rows = []
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith(("=", "chaos summary:", "chaos:", "ERROR")):
            break
        rows.append([c.strip() for c in line.split("  ") if c.strip()])
    return rows


EXPECTED_TABLE = [
    ["area", "preset", "fault", "runs", "lost", "dup", "reord", "wrong", "pending", "unatt", "verdict", "expected",
     "result"],
    ["ordering", "baseline", PAID_FIRST, "2", "0", "0", "2", "2/2", "0", "0", "invalid"],
    ["ordering", "s1", "none", "2", "0", "0", "0", "0/2", "0", "0", "valid"],
]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["no-xdist", "xdist"])
def test_the_table_and_the_json_list_every_cell(tmp_path, private_base, workers):
    summary = tmp_path / "summary.json"
    run = child(tmp_path, private_base, "cells", "--chaos-runs", "2", f"--chaos-summary={summary}",
                "--chaos-time-scale", SCENARIO_TIME_SCALE, *workers)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = table(run.stdout)
    assert len(rows) == 3, run.stdout
    assert rows[0] == EXPECTED_TABLE[0]
    for got, want in zip(rows[1:], EXPECTED_TABLE[1:]):
        assert got[:11] == want, run.stdout
        assert got[-1] == "yes", run.stdout          # the row of the table judged them and they matched
        assert "wrong_final_state_runs" in got[11]    # the bounds, in short
    assert f"chaos summary: 2 cells written to {summary}" in run.stdout

    doc = json.loads(summary.read_text())
    assert doc["schema_version"] == 1 and len(doc["cells"]) == 2
    baseline, s1 = doc["cells"]
    for cell in doc["cells"]:
        assert set(ROW_KEYS) <= set(cell), cell
        assert cell["area"] == "ordering" and cell["runs"] == 2
        assert cell["match"] is True and cell["wall_s"] > 0 and cell["test"].endswith(("holds", "every_run"))
        assert cell["outcome"] == "match" and cell["rig_failures"] == []
    assert baseline["preset"] == "baseline" and baseline["fault"] == "hold" and baseline["wrong_final_state_runs"] == 2
    assert baseline["params"]["hold.gate"] == "before_apply" and all(k.startswith("hold.") for k in baseline["params"])
    assert baseline["verdict"] == "invalid" and "wrong_final_state_runs == runs" in baseline["expected"]
    assert s1["preset"] == "s1" and s1["fault"] == "none" and s1["params"] == {} and s1["verdict"] == "valid" and s1["wrong_final_state_runs"] == 0

    # Passing cells leave no run dirs behind.
    for name in ("s1", "baseline"):
        root = Path((run.out / f"{name}.root").read_text())
        assert not root.exists(), f"{root} outlived its passing test"


def test_a_mismatching_cell_shows_NO_and_keeps_its_run_dirs(tmp_path, private_base):
    summary = tmp_path / "summary.json"
    run = child(tmp_path, private_base, "mismatch", "-rA", f"--chaos-summary={summary}",
                "--chaos-time-scale", SCENARIO_TIME_SCALE)
    assert run.returncode == 1, run.stdout + run.stderr
    mismatch = next(r for r in table(run.stdout)[1:] if r[-2] == "lost >= 1")
    assert mismatch[:3] == ["scenarios", "s1", "none"] and mismatch[-1] == "NO", run.stdout
    assert "EXPECTATION MISMATCH s1 x none" in run.stdout
    root = Path(re.search(r"run dirs: (/\S+)", run.stdout).group(1))
    assert "chaos run dirs (kept)" in run.stdout
    assert root.is_dir() and any(root.iterdir()), f"the failing cell's run dirs were not kept: {root}"
    # A cell run with check=False whose expectation the test never asserted errors the test.
    assert "ran with check=False and its expectation was never asserted" in run.stdout
    cells = json.loads(summary.read_text())["cells"]
    assert sorted((c["match"], c["outcome"]) for c in cells) == [(False, "mismatch"), (True, "match")]
    assert "RIG BROKE" not in run.stdout and "COULD NOT TELL" not in run.stdout


@pytest.mark.parametrize("where, message", [
    ("missing/summary.json", "does not exist"),
    (".", "that is a directory"),
])
def test_a_summary_path_that_cannot_be_written_is_refused_before_any_test(tmp_path, private_base, where, message):
    run = child(tmp_path, private_base, "vanish", f"--chaos-summary={tmp_path / where}",
                env={"CHAOS_CELLS_VANISH": str(tmp_path / "never")})
    assert run.returncode == 4, run.stdout + run.stderr
    assert message in run.stderr and "give a file path in an existing, writable directory" in run.stderr
    assert "passed" not in run.stdout and not (tmp_path / "never").exists()


def test_a_summary_that_cannot_be_written_at_the_end_still_leaves_the_test_results(tmp_path, private_base):
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    junit = tmp_path / "junit.xml"
    run = child(tmp_path, private_base, "vanish", f"--chaos-summary={doomed / 'summary.json'}",
                f"--junitxml={junit}", env={"CHAOS_CELLS_VANISH": str(doomed)})
    assert run.returncode == 4, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "could not write the summary" in run.stdout and "give a file path" in run.stdout
    assert 'tests="' in junit.read_text() and "test_the_summary_dir_vanishes" in junit.read_text()


def test_the_table_shows_each_fault_with_its_own_parameters_and_the_replaced_parts():
    from chaos.report.rows import table_lines

    row = dict(area="load", preset="baseline", fault="kill-consumer+publish-blip+promote-replica",
               params={"respawn": "1", "workload": "many-orders:keys=50", "publish-blip.duration_ms": "800",
                       "promote-replica.after_entries": "500"},
               runs=1, lost=3, duplicated=0, reordered=0, wrong_final_state_runs=1, pending_left=0,
               unattempted=2, verdict="invalid", expected=None, match=None)
    header, line = table_lines([row])
    cells = [c.strip() for c in line.split("  ") if c.strip()]
    assert cells[1:3] == ["baseline:respawn=1 +workload",
                          "kill-consumer+publish-blip:duration_ms=800+promote-replica:after_entries=500"], line
    assert cells[3:] == ["1", "3", "0", "0", "1/1", "0", "2", "invalid", "(no row)", "-"], line


RIG_TEST = "test_the_proxy_server_dies_mid_run"


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` (servers of a cluster based there)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmd:
            found.append(f"{pid}: {cmd[:200]}")
    return found


def test_a_cell_whose_rig_broke_is_broken_named_and_followed_by_a_healthy_cell(tmp_path, private_base):
    from chaos.cluster.proxy_server import proxy_choice
    if proxy_choice()[0] != "spawn":
        pytest.skip("TOXIPROXY_URL names a shared proxy server: the cluster has no proxy process of its own to kill")
    summary, results = tmp_path / "summary.json", tmp_path / "allure-results"
    run = child(tmp_path, private_base, "rig", "-n", "1", "-p", "no:randomly", f"--chaos-summary={summary}",
                f"--alluredir={results}")
    out = run.stdout + run.stderr
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, out
    # pytest: the error is the rig's, named, not an AssertionError
    assert re.search(r"RigFailure: RIG FAILURE: s1 x test-kill-proxy-server: run 0: proxy server \(pid \d+\) ", out), out
    assert "EXPECTATION MISMATCH" not in out
    # the terminal summary: RIG in the table, and a line saying the rig broke and why
    rows = {r[2]: r for r in table(run.stdout)[1:]}
    assert rows["test-kill-proxy-server"][-1] == "RIG" and rows["none"][-1] == "yes", run.stdout
    line = re.search(rf"^RIG BROKE \S+::{RIG_TEST} \(s1 x test-kill-proxy-server\): run 0: proxy server "
                     r"\(pid \d+\) (died|unreachable)\S*.*$", run.stdout, flags=re.M)
    assert line and "log tail" not in line.group(0), run.stdout
    assert "the rig broke in 1" in run.stdout
    # --chaos-summary: the outcome says who is to blame
    cells = {c["test"].rpartition("::")[2]: c for c in json.loads(summary.read_text())["cells"]}
    broken = cells[RIG_TEST]
    assert broken["outcome"] == "rig" and broken["verdict"] == "unknown", broken
    assert broken["rig_failures"][0].startswith("run 0: proxy server (pid "), broken
    healthy = cells["test_the_next_cell_on_the_worker_runs_on_a_healthy_topology"]
    assert healthy["outcome"] == "match" and healthy["verdict"] == "valid" and healthy["rig_failures"] == []
    # Allure: broken (not failed), and in the rig's category by the message it carries
    status = {r["name"]: r for r in (json.loads(p.read_text()) for p in results.glob("*-result.json"))}
    assert status["s1 x test-kill-proxy-server"]["status"] == "broken", status.keys()
    assert "RIG FAILURE: s1 x test-kill-proxy-server" in status["s1 x test-kill-proxy-server"]["statusDetails"]["message"]
    assert status["s1 x none"]["status"] == "passed"
    categories = json.loads((results / "categories.json").read_text())
    assert re.search(categories[0]["messageRegex"], status["s1 x test-kill-proxy-server"]["statusDetails"]["message"])
    # nothing of the child's clusters outlives it (the broken one was rebuilt, the new one closed)
    assert processes_under(private_base) == []
