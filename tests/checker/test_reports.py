"""Timeline plot, matrix page, Allure attachments and categories."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from checker_histories import CREATED_42, CREATED_43, PAID_42, History, final

from chaos.cellspec import CellSpec
from chaos.checker import check_run, summarize
from chaos.expectations.table import RUNS, Expectation, UnknownVerdict, assert_cell, gt
from chaos.report import render_matrix, write_matrix
from chaos.report.matrix import (
    DEFAULT_RUNS,
    ROW_KEYS,
    cell_status,
    coverage,
    matrix_cell,
    plan_cells,
    write_matrix_page,
)
from chaos.report.timeline import build_timeline, plot_timeline

CATEGORIES = json.loads((Path(__file__).parents[2] / "reports" / "categories.json").read_text())


def baseline_history() -> History:
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    h.deliver(CREATED_42, "1-0", process="C1").deliver(PAID_42, "2-0", process="C2")
    h.fault("latency", "start").apply(PAID_42, process="C2").apply(CREATED_42, process="C1")
    h.fault("latency", "stop").fault("pause", "start")
    h.deliver(CREATED_42, "1-0", process="C2", via="claim", count=2)
    return h.publish(CREATED_43, "dangling")


class TestTimeline:
    def test_lanes_spans_markers_and_fault_windows(self):
        tl = build_timeline(baseline_history().ops)
        assert tl.lanes == ["P-order", "C1", "C2"]  # the nemesis shows as shaded windows
        assert [name for name, _, _ in tl.faults] == ["latency", "pause"]
        pause = tl.faults[1]
        assert pause[2] == pytest.approx(tl.end_ms)  # never healed: shaded to the end
        assert len(tl.bars["ok"]) == 2 and len(tl.bars["applied"]) == 2
        (dangling,) = tl.bars["dangling"]
        assert dangling[0] == 0  # the producer's lane
        assert [t for _, t in tl.marks["redeliver"]] and len(tl.marks["deliver"]) == 2
        assert [text for _, _, text in tl.labels] == ["v2", "v1"]

    def test_labels_name_the_key_when_several_keys_are_applied(self):
        h = History().apply(CREATED_42).apply(CREATED_43)
        assert [text for _, _, text in build_timeline(h.ops).labels] == ["42:v1", "43:v1"]

    def test_png_for_small_and_large_histories(self):
        assert plot_timeline(baseline_history().ops, "baseline").startswith(b"\x89PNG")
        big = History()
        for k in range(2000):
            ev = type(CREATED_42)(f"e{k}-1", str(k), 1, "created")
            big.publish(ev, entry_id=f"{k}-0").handle(ev, f"{k}-0", process=f"C{k % 4 + 1}")
        tl = build_timeline(big.ops)
        assert tl.labels == []  # too many applies to label
        assert plot_timeline(big.ops).startswith(b"\x89PNG")

    def test_start_up_before_the_first_worker_op_is_left_out(self):
        ops = baseline_history().ops
        spawned = {"time": ops[0]["time"] - 7.5, "process": "orchestrator", "type": "info", "f": "log",
                   "value": {"spawned": "C1"}}
        tl = build_timeline([spawned, *ops])
        assert "orchestrator" not in tl.lanes and tl.skipped_ms == pytest.approx(7500)
        assert tl.end_ms == pytest.approx(build_timeline(ops).end_ms)
        assert plot_timeline([spawned, *ops]).startswith(b"\x89PNG")

    def test_empty_history_is_refused(self):
        with pytest.raises(ValueError, match="empty history"):
            build_timeline([])


def cell_json(preset: str, fault: str, wrong: bool, expected: Expectation | None, area: str = "ordering",
              **extra) -> dict:
    """A matrix cell (summary row) of a one-run cell, through the `run --json` object."""
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    for ev in ([PAID_42, CREATED_42] if wrong else [CREATED_42, PAID_42]):
        h.handle(ev, "1-0" if ev is CREATED_42 else "2-0")
    result = check_run(h.ops, final({"42": ("created", 1) if wrong else ("paid", 2)}), **extra)
    out = summarize([result]).to_json(preset=preset, fault=fault, expected=expected)
    return matrix_cell(out, area=area, expected=expected)


class TestMatrix:
    def cells(self):
        return [
            cell_json("baseline", "none", True, Expectation.of(wrong_final_state_runs=RUNS)),
            cell_json("s1", "none", True, Expectation.of(wrong_final_state_runs=0)),
            cell_json("s1", "kill-consumer", False, None, area="delivery"),
            cell_json("s5<script>:x=1", "none", False, Expectation.of(lost=0), unknown_reasons=["C1 died"]),
        ]

    def test_status_of_each_cell(self):
        assert [cell_status(c) for c in self.cells()] == ["match", "mismatch", "none", "unknown"]

    def test_cells_are_summary_rows(self):
        row = self.cells()[1]
        assert list(row)[:len(ROW_KEYS)] == list(ROW_KEYS)
        assert (row["area"], row["preset"], row["fault"], row["params"]) == ("ordering", "s1", "none", {})
        assert (row["expected"], row["match"], row["wrong_final_state_runs"]) == ("wrong_final_state_runs == 0",
                                                                                   False, 1)
        assert row["mismatches"] == ["wrong_final_state_runs: expected == 0, measured 1/1 [WRONG_FINAL_STATE_RUNS: 1/1]"]
        assert self.cells()[3]["params"] == {"x": "1"} and self.cells()[2]["match"] is None

    def test_page_has_a_table_per_area_and_the_coverage_grid(self, tmp_path):
        cov = {"presets": ["baseline", "s1"], "faults": ["none", "kill-consumer"],
               "rows": {"baseline": {"none": 2}}, "uncovered": [["baseline", "kill-consumer"], ["s1", "none"],
                                                                 ["s1", "kill-consumer"]]}
        page = write_matrix(self.cells(), tmp_path / "m" / "matrix.html", coverage_info=cov).read_text()
        assert page.count("<h2") == 3  # ordering, delivery, coverage
        assert '<h2 id="area-ordering">ordering <span class="small">(3 cells: 1 matches, 1 MISMATCH, 1 unknown)' in page
        assert "Coverage: 1 of 4 preset x fault pairs have a row" in page
        assert page.count('class="gap"') == 3 and page.count('class="has"') == 1
        assert "wrong_final_state_runs: expected == 0, measured 1/1" in page
        assert "s5&lt;script&gt;" in page and "<script>" not in page
        assert "4 cells: 1 matches, 1 MISMATCH, 1 unknown, 1 no row" in page
        assert "wrong_final_state_runs == runs" in page and "(no row)" in page

    def test_a_valid_cell_with_a_wrong_key_shows_why(self):
        """ack after + a kill: the row is wrong only because paid still waits in the PEL."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0").handle(CREATED_42, "1-0")
        pending = [{"entry_id": "2-0", "stream": "orders", "event_id": "e42-2", "consumer": "C1", "delivery_count": 1}]
        cell = summarize([check_run(h.ops, final({"42": ("created", 1)}, pending=pending))])
        page = render_matrix([matrix_cell(cell.to_json(preset="ack-after", fault="kill-consumer"), area="delivery",
                                          expected=None)])
        assert "<td>valid</td>" in page and '<td class="num">1</td>' in page  # pending_left 1

    def test_cell_without_preset_is_refused(self):
        with pytest.raises(ValueError, match="without 'preset'"):
            render_matrix([{"fault": "none"}])


class TestPlan:
    def test_every_row_runs_with_its_own_parameters_and_finds_itself(self):
        from chaos.expectations import expect, table
        from chaos.strategies.presets import resolve
        planned = plan_cells()
        assert len(planned) == len(table().rows())
        for cell in planned:
            label = resolve(cell.preset, parts=dict(cell.parts)).label()
            assert expect(label, list(cell.faults) or None, params=dict(cell.parts) or None) is cell.expected

    def test_an_area_gives_only_its_rows(self):
        planned = plan_cells("producer")
        assert planned and {c.area for c in planned} == {"producer"} and all(c.expected for c in planned)
        assert any(c.preset.startswith("s1:paid_at_ms=300,payment_service=1") for c in planned)

    def test_run_counts_come_from_the_area_cells(self):
        from chaos.expectations.failover import CELLS, RUN_COUNT
        # Most failover cells run RUN_COUNT times; a row asking for a break in a fraction of
        # runs sets its own count from the measured rate. The plan takes each cell's count.
        assert sorted(c.runs for c in plan_cells("failover")) == sorted(c.runs for c in CELLS)
        assert RUN_COUNT in {c.runs for c in CELLS} and len({c.runs for c in CELLS}) > 1
        assert {c.runs for c in plan_cells("ordering")} == {DEFAULT_RUNS}

    def test_presets_and_faults_pick_rows_and_defaults_for_pairs_without_one(self):
        planned = plan_cells(presets=["s1"], faults=["publish-blip", "kill-consumer"])
        judged = [c for c in planned if c.expected is not None]
        assert {c.fault.partition(":")[0] for c in judged} == {"publish-blip"} and len(judged) == 2
        (bare,) = [c for c in planned if c.expected is None]
        assert (bare.preset, bare.faults, bare.area) == ("s1", ("kill-consumer",), "")
        assert [c for c in plan_cells("delivery", presets=["s1"], faults=["kill-consumer"])] == []

    def test_unknown_area_names_the_areas(self):
        from chaos.errors import BadArguments
        with pytest.raises(BadArguments, match="areas are: ordering"):
            plan_cells("nope")

    def test_coverage_lists_pairs_without_a_row(self):
        cov = coverage(["s1", "baseline"], ["none", "promote-replica", "kill-consumer"])
        assert cov["rows"]["s1"]["none"] >= 1 and cov["rows"]["baseline"]["promote-replica"] >= 1
        assert ["s1", "kill-consumer"] in cov["uncovered"] and ["s1", "none"] not in cov["uncovered"]


def category_of(message: str, status: str = "failed") -> str | None:
    for category in CATEGORIES:  # Allure 2 uses Java's matches(): the whole message
        if status in category["matchedStatuses"] and re.fullmatch(category["messageRegex"], message):
            return category["name"]
    return None


class TestCategories:
    def failure(self, expectation: Expectation, lose: bool = True, **kwargs) -> str:
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        if not lose:
            h.handle(CREATED_42, "1-0")
        h.handle(PAID_42, "2-0")
        cell = summarize([check_run(h.ops, final({"42": ("paid", 2)}), **kwargs)])
        with pytest.raises((AssertionError, UnknownVerdict)) as info:
            assert_cell(cell, expectation, preset="s1", fault="none")
        return str(info.value)

    def test_lost_event(self):
        assert category_of(self.failure(Expectation.of(lost=0))) == "Lost events"

    def test_known_broken_strategy_that_held(self):
        name = category_of(self.failure(Expectation.of(reordered=gt(0))))
        assert name.startswith("Known-broken strategy did not break")

    def test_unknown_verdict_is_broken(self):
        message = self.failure(Expectation.of(lost=1), lose=False, unknown_reasons=["drain timed out"])
        assert category_of(message, "broken").startswith("Unknown verdict")

    def test_other_mismatch(self):
        assert category_of(self.failure(Expectation.of(verdict="valid"))) == "Other expectation mismatch"

    def test_every_category_has_the_allure_fields(self):
        for category in CATEGORIES:
            assert set(category) == {"name", "messageRegex", "matchedStatuses"}
            re.compile(category["messageRegex"])


def test_matrix_page_from_the_matrix_document(tmp_path):
    doc = {"schema_version": 1, "runs": 1, "seed": 7, "time_scale": 0.5, "coverage": coverage(["s1"], ["none"]),
           "cells": [cell_json("s1", "none", False, Expectation.of(wrong_final_state_runs=0))]}
    page = write_matrix_page(doc, tmp_path / "matrix.html")
    assert "Chaos matrix (runs 1, seed 7, time scale 0.5)" in page.read_text()
    assert "Coverage: 1 of 1 preset x fault pairs" in page.read_text()
    assert json.loads(page.with_suffix(".json").read_text())["seed"] == 7
    with pytest.raises(ValueError, match="use write_matrix"):
        write_matrix_page([], tmp_path / "x.html")


def test_committed_allure_configs_are_the_generated_ones():
    """reports/categories.json (Allure 2) and reports/allurerc.json (Allure 3) come from
    chaos/report/categories.py: `python -m chaos.report.categories` rewrites them."""
    from chaos.report.categories import allurerc_json, categories_json
    reports = Path(__file__).parents[2] / "reports"
    assert (reports / "categories.json").read_text() == categories_json()
    assert (reports / "allurerc.json").read_text() == allurerc_json()


def test_matrix_cells_carry_the_summary_rows_of_the_terminal(tmp_path):
    """The summary row: a matrix cell holds the same row as chaos.report.rows.cell_row (the terminal
    summary and --chaos-summary), so the nightly merge concatenates them."""
    from chaos.report.rows import cell_row
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    h.handle(PAID_42, "2-0").handle(CREATED_42, "1-0")
    cell = summarize([check_run(h.ops, final({"42": ("created", 1)}))])
    cell.wall_s = 1.25
    expected = Expectation.of(wrong_final_state_runs=0)
    preset, faults, parts = "s1:paid_at_ms=300", ["publish-blip:at=before_publish"], {"workload": "many-orders:keys=2"}
    out = cell.to_json(preset=preset, fault="+".join(faults), expected=expected, wall_s=cell.wall_s)
    row = cell_row(cell, CellSpec.parse(preset, faults, parts), area="producer", expected=expected)
    mine = matrix_cell(out, area="producer", expected=expected, parts=parts)
    assert {k: mine[k] for k in row} == row


class TestTopology:
    def test_sentinel_rows_need_the_sentinel_topology(self):
        from chaos.report.matrix import split_by_topology
        runnable, skipped = split_by_topology(plan_cells(), "replica")
        assert skipped and all("sentinel-failover" in s["fault"] for s in skipped)
        assert all(s["reason"] == "needs --topology sentinel (this run: replica)" for s in skipped)
        assert not [c for c in runnable if "sentinel-failover" in c.fault]
        on_sentinel, none_skipped = split_by_topology(plan_cells("sentinel"), "sentinel")
        assert on_sentinel and none_skipped == []

    def test_the_page_lists_rows_not_run(self, tmp_path):
        skipped = [{"area": "sentinel", "preset": "s1", "fault": "sentinel-failover:at_ms=0", "parts": {},
                    "reason": "needs --topology sentinel (this run: replica)"}]
        page = write_matrix_page({"cells": [], "skipped": skipped, "topology": "replica"}, tmp_path / "m.html")
        text = page.read_text()
        assert '<h2 id="not-run">Not run here (1 row)</h2>' in text and "1 cell needs --topology sentinel" in text
        assert "Chaos matrix (topology replica)" in text

    def test_an_area_with_no_row_for_this_topology_is_refused_before_anything_starts(self):
        import os
        import subprocess
        import sys
        env = {k: v for k, v in os.environ.items() if k != "CHAOS_TOPOLOGY"}
        env["PYTHONPATH"] = str(Path(__file__).parents[2])
        proc = subprocess.run([sys.executable, "-m", "chaos", "matrix", "--area", "sentinel"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 254 and "needs --topology sentinel" in proc.stderr and "change --topology" in proc.stderr
