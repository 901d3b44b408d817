"""Who is to blame for a cell, in every report: the strategy (mismatch), the rig (rig
failure) or nobody can tell (unknown verdict). Results come from the real checker, with
the rig failures the orchestrator hands it; the categories' regexes are run on the real
messages the cell runner raises."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chaos.cellrun import CellRun, as_cell
from chaos.cellspec import CellSpec
from chaos.checker import check_run, summarize
from chaos.errors import RigFailure
from chaos.expectations import Expectation, UnknownVerdict, eq
from chaos.report.categories import CATEGORIES
from chaos.report.matrix import matrix_cell, render_matrix
from chaos.report.merge import main as merge_main
from chaos.report.rows import blame_lines, cell_row, headline, outcome_counts, table_lines
from chaos.workload.final_state import FinalState

PROXY_DIED = "proxy server (pid 4242) died: killed by SIGKILL; log tail:\nlistening on 127.0.0.1:8474\nproxy a up"
WORKER_DIED = "C1 (pid 77) died unexpectedly: killed by SIGKILL"
ROW = Expectation.of(lost=eq(0), verdict="valid")


def result(*, rig: list[str] = (), unknown: list[str] = ()):
    cell = summarize([check_run([], FinalState(rows={}), rig_failures=rig, unknown_reasons=unknown)])
    cell.run_root = Path("/tmp/chaos-runs/s1-x")
    return cell


def row_of(cell, expected=ROW, **extra) -> dict:
    return {**cell_row(cell, CellSpec.parse("s1"), area="ordering", expected=expected), **extra}


def category(message: str, status: str = "broken") -> list[str]:
    """The categories whose rule matches, as Allure 3 applies them (JavaScript's search)."""
    return [c["name"] for c in CATEGORIES
            if status in c["matchedStatuses"] and re.search(c["messageRegex"], message)]


def test_each_outcome_and_its_row():
    rig, unknown, fine = result(rig=[PROXY_DIED]), result(unknown=[WORKER_DIED]), result()
    assert row_of(rig)["outcome"] == "rig"
    assert row_of(rig)["rig_failures"] == ["run 0: proxy server (pid 4242) died: killed by SIGKILL"]
    assert row_of(rig)["match"] is False          # the verdict bound fails, but the rig is to blame
    assert row_of(unknown)["outcome"] == "unknown" and row_of(unknown)["rig_failures"] == []
    assert row_of(fine)["outcome"] == "match" and row_of(fine, expected=None)["outcome"] == "none"
    assert row_of(fine, expected=Expectation.of(lost=eq(1)))["outcome"] == "mismatch"
    assert row_of(unknown, expected=Expectation.of(verdict="unknown"))["outcome"] == "match"
    # the matrix (run --json) and the terminal agree
    out = rig.to_json(preset="s1", fault="none", expected=ROW)
    assert {k: v for k, v in matrix_cell(out, area="ordering", expected=ROW).items() if k in row_of(rig)} == row_of(rig)


def test_the_terminal_table_and_its_blame_lines():
    rows = [row_of(result(rig=[PROXY_DIED]), test="suites/x/test_a.py::test_rig"),
            row_of(result(unknown=[WORKER_DIED]), test="suites/x/test_a.py::test_worker"),
            row_of(result(), expected=Expectation.of(lost=eq(1)), test="suites/x/test_a.py::test_mismatch")]
    header, *body = table_lines(rows)
    assert header.split()[-1] == "result" and [line.split()[-1] for line in body] == ["RIG", "UNKNOWN", "NO"]
    assert blame_lines(rows) == [
        "RIG BROKE suites/x/test_a.py::test_rig (s1 x none): run 0: proxy server (pid 4242) died: killed by SIGKILL",
        "COULD NOT TELL suites/x/test_a.py::test_worker (s1 x none): run 0: C1 (pid 77) died unexpectedly: "
        "killed by SIGKILL"]
    assert outcome_counts(rows) == {"match": 0, "mismatch": 1, "rig": 1, "unknown": 1, "none": 0}
    assert headline("PostgreSQL (pid 9) unreachable: OperationalError: refused, log tail:\n...") == \
        "PostgreSQL (pid 9) unreachable: OperationalError: refused"


def test_the_cell_runner_raises_rig_failure_and_unknown_verdict_and_each_lands_in_its_category():
    cell = as_cell("s1")
    rig = CellRun(cell, result(rig=[PROXY_DIED]), ROW, "ordering", row_of(result(rig=[PROXY_DIED])))
    with pytest.raises(RigFailure) as broke:
        rig.check()
    text = str(broke.value)
    assert text.startswith("RIG FAILURE: s1 x none: run 0: proxy server (pid 4242) died: killed by SIGKILL\n")
    assert "proxy a up" in text and "run dirs: /tmp/chaos-runs/s1-x" in text    # the log tail and where to look
    allure_message = f"chaos.errors.RigFailure: {text}"                          # as allure-pytest writes it
    assert category(allure_message) == [CATEGORIES[0]["name"]]
    assert CATEGORIES[0]["name"].startswith("Unknown verdict: the rig broke")
    for other in ("faults.interface.FaultError: run 0: failpoint 'x' never reached",      # a fault did not heal
                  "chaos.errors.RigFailure: the rig failed: run 0: PostgreSQL (pid 9) died"):  # a black-box cell
        assert category(other) == [CATEGORIES[0]["name"]], other

    assert "other reasons" not in text      # the rig failure alone: nothing else to say

    # a fault that failed on the broken rig is among the runs' reasons: the message shows it
    stopped = "promote-replica: stopped after its kill, before its promotion"
    both = result(rig=[PROXY_DIED], unknown=[stopped])
    with pytest.raises(RigFailure) as broke:
        CellRun(cell, both, ROW, "ordering", row_of(both)).check()
    assert f"the runs' other reasons:\n  run 0: {stopped}\n" in str(broke.value)
    assert str(broke.value).count("proxy a up") == 1       # the rig failure itself is not repeated

    # not judged (the test asserts its own figures): still broken by the rig
    unjudged = CellRun(cell, result(rig=[PROXY_DIED]), None, "ordering", row_of(result(rig=[PROXY_DIED])),
                       judged=False)
    with pytest.raises(RigFailure):
        unjudged.check()

    # an unknown verdict the row bounds (verdict == valid) could not tell: not a mismatch
    unknown = CellRun(cell, result(unknown=[WORKER_DIED]), ROW, "ordering", row_of(result(unknown=[WORKER_DIED])))
    with pytest.raises(UnknownVerdict) as told:
        unknown.check()
    assert str(told.value).startswith("UNKNOWN: s1 x none: run 0: C1 (pid 77) died unexpectedly")
    assert category(f"chaos.expectations.table.UnknownVerdict: {told.value}")[0].startswith(
        "Unknown verdict: the runs could not tell")
    assert category("AssertionError: EXPECTATION MISMATCH s1 x none\n  lost [LOST: 3]", "failed")[0] == "Lost events"


def test_the_matrix_page_and_the_merge_tell_strategy_broke_from_rig_broke(tmp_path, capsys):
    rig = row_of(result(rig=[PROXY_DIED]), test="t::rig")
    fine = row_of(result(), test="t::fine")
    page = render_matrix([rig, fine])
    assert '<tr class="rig"' in page and "RIG BROKE" in page
    assert "rig: run 0: proxy server (pid 4242) died: killed by SIGKILL" in page
    assert "rig broke: 1 cell(s)" in page and "strategy broke: none" in page

    def night(*rows: dict) -> tuple[int, str, dict]:
        shard = tmp_path / f"n{len(list(tmp_path.iterdir()))}" / "shard-1"
        shard.mkdir(parents=True)
        (shard / "summary.json").write_text(json.dumps({"schema_version": 1, "cells": list(rows)}))
        code = merge_main([str(shard), "--out", str(shard.parent / "out"), "--allure", "none"])
        return code, capsys.readouterr().out, json.loads((shard.parent / "out" / "summary.json").read_text())

    code, text, doc = night(rig, fine)
    assert code == 2 and "night: RIG BROKE in 1 cell(s), no strategy regression" in text
    assert "  RIG BROKE t::rig (s1 x none): run 0: proxy server (pid 4242) died: killed by SIGKILL" in text
    assert doc["outcomes"] == {"match": 1, "mismatch": 0, "rig": 1, "unknown": 0, "none": 0}
    mismatch = row_of(result(), expected=Expectation.of(lost=eq(1)), test="t::mismatch")
    code, text, doc = night(rig, mismatch)
    assert code == 1 and "night: STRATEGY BROKE: 1 cell(s) left their expectation (and the rig broke in 1)" in text
    code, text, _ = night(fine)
    assert code == 3 and "night: every cell behaved as its row says" in text      # 3: no Allure report asked for
