"""The matrix page: the expectation table's cells as the runner ran them, rendered.

The plan (`plan_cells`, `split_by_topology`, `coverage`) lives in chaos/expectations/plan.py
and the run and judging in chaos/cellrun.py (the runner the fixture and `chaos run` use);
here `matrix_row` adds to a cell's summary row (the same keys and rows as the
terminal summary and `--chaos-summary`, so the nightly merge concatenates them) what the
page explains with (mismatches, notes, replay command), and `matrix_cell` builds that row
from a stored `run --json` object.

The page lays each area out like the README's expectation table, one line per cell with
its figures, colour by what matters: a cell that behaved as its row says is green (also a
known-broken strategy that broke), a mismatch (the strategy broke) red, a rig failure (the
framework's own parts broke: the component and what happened to it) orange, an unknown
verdict (the runs could not tell) grey, a cell without a row white; then the coverage grid,
so what is not covered is visible.
"""
from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chaos.cellspec import NO_FAULT, CellSpec, split_faults
from chaos.expectations.plan import (  # noqa: F401 - planning lives there; re-exported for the page's users
    DEFAULT_RUNS, FAULT_TOPOLOGY, PlannedRow, check_area, coverage, plan_cells, split_by_topology)

ROW_KEYS = ("area", "preset", "fault", "params", "runs", "lost", "duplicated", "reordered",
            "wrong_final_state_runs", "pending_left", "unattempted", "verdict", "expected", "match", "wall_s")
# beside the row keys, kept from the `run --json` object for the page and for people
EXTRA_KEYS = ("published", "redelivered", "recovered", "dlq", "unexpected", "unsettled_keys", "mismatches",
              "unknown_reasons", "notes", "reproduce", "run_dir", "seed", "time_scale")
STATUS_TEXT = {"match": "matches", "mismatch": "MISMATCH", "rig": "RIG BROKE", "unknown": "unknown",
               "none": "no row"}


def matrix_row(row: Mapping[str, Any], out: Mapping[str, Any], *, area: str) -> dict:
    """A matrix entry: a cell's summary row (chaos.cellrun's CellRun.row, under the matrix's
    `area`) with the EXTRA_KEYS of its `run --json` object (the replay command among them)."""
    entry = {k: v for k, v in row.items() if k != "reproduce"}
    entry["area"], entry["runs"] = area, out.get("runs", entry["runs"])   # runs asked for, as the page has shown
    entry.update({k: out[k] for k in EXTRA_KEYS if k in out})
    return entry


def matrix_cell(out: Mapping[str, Any], *, area: str, expected: Any, parts: Mapping[str, str] | None = None,
                spec: CellSpec | None = None) -> dict:
    """The summary row of a cell from its `run --json` object, plus EXTRA_KEYS;
    `spec` is the cell as run (else parsed from the object's `preset`, `fault` and `parts`)."""
    from chaos.report.rows import expected_text, headline, outcome
    if spec is None:
        fault = out.get("fault") or NO_FAULT
        spec = CellSpec.parse(str(out["preset"]), () if fault == NO_FAULT else split_faults(fault),
                              parts or out.get("parts") or {})
    preset_name, fault_name, params = spec.key
    wall = out.get("wall_s")
    row = {
        "area": area, "preset": preset_name, "fault": fault_name, "params": params, "runs": out.get("runs"),
        **{k: out.get(k) for k in ("lost", "duplicated", "reordered", "wrong_final_state_runs", "pending_left",
                                   "unattempted", "verdict")},
        "expected": expected_text(expected),
        "match": None if expected is None else bool(out.get("matches_expectation")),
        "wall_s": None if wall is None else round(float(wall), 3),
    }
    rig = list(out.get("rig_failures") or [])
    row["outcome"] = outcome(verdict=out.get("verdict"), rig_failures=rig, expected=expected, match=row["match"])
    row["rig_failures"] = [headline(f) for f in rig]
    row["unknown_reasons"] = list(out.get("unknown_reasons") or [])
    row.update({k: out[k] for k in EXTRA_KEYS if k in out})
    return row


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #212121; }
h2 { margin: 1.4em 0 0.4em 0; }
table { border-collapse: collapse; margin-bottom: 0.5em; }
th, td { border: 1px solid #bdbdbd; padding: 4px 7px; vertical-align: top; font-size: 13px; }
th { background: #eeeeee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.match td { background: #e8f5e9; } tr.mismatch td { background: #ffebee; }
tr.unknown td { background: #eeeeee; } tr.none td { background: #ffffff; } tr.rig td { background: #fff3e0; }
tr.rig .status { color: #e65100; } .rigwhy { color: #bf360c; font-size: 12px; }
.status { font-weight: 600; white-space: nowrap; } tr.mismatch .status { color: #c62828; }
tr.match .status { color: #2e7d32; } tr.unknown .status { color: #616161; }
.small { color: #424242; font-size: 12px; } code { font-size: 12px; }
.name { font-weight: 600; white-space: nowrap; } .spec { color: #424242; font-size: 12px; max-width: 22em; }
.mm { color: #b71c1c; font-size: 12px; margin: 2px 0 0 0; padding-left: 1.2em; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; border: 1px solid #bdbdbd; }
table.cov td { text-align: center; min-width: 1.6em; padding: 2px 4px; }
table.cov td.has { background: #c8e6c9; } table.cov td.gap { background: #fafafa; color: #bdbdbd; }
table.cov th.f { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; font-size: 12px; }
"""
COLUMNS = (("preset", "preset"), ("fault", "fault"), ("parts replaced", "params"), ("runs", "runs"),
           ("lost", "lost"), ("dup", "duplicated"), ("reord", "reordered"), ("wrong", "wrong_final_state_runs"),
           ("pending", "pending_left"), ("verdict", "verdict"), ("expected", "expected"), ("result", "status"))
NUMERIC = {"runs", "lost", "duplicated", "reordered", "pending_left"}


def cell_status(cell: Mapping[str, Any]) -> str:
    """`match`, `mismatch` (the strategy broke), `rig` (the rig broke), `unknown` (the runs
    could not tell) or `none` (no row): the row's ``outcome`` (chaos.report.rows)."""
    from chaos.report.rows import cell_outcome
    return cell_outcome(cell)


def split_params(cell: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, dict[str, str]], dict[str, str]]:
    """A row's params as (preset's own, per fault, replaced parts), as its CellSpec holds them."""
    from chaos.expectations.table import key_spec
    params = cell.get("params") if isinstance(cell.get("params"), Mapping) else {}
    spec = key_spec(str(cell.get("preset") or ""), cell.get("fault"), params)
    per_fault: dict[str, dict[str, str]] = {}
    for fault in spec.faults:
        per_fault.setdefault(fault.name, {}).update(fault.values)
    return spec.preset.values, per_fault, spec.part_texts


def _spec_html(name: str, params: Mapping[str, str]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in params.items())
    return f'<div class="name">{html.escape(name)}</div>' + (f'<div class="spec">{html.escape(shown)}</div>'
                                                             if shown else "")


def _row_html(cell: Mapping[str, Any]) -> str:
    from chaos.report.rows import headline
    status = cell_status(cell)
    own, per_fault, parts = split_params(cell)
    tds = []
    for _, key in COLUMNS:
        if key == "status":
            extra = ""
            if cell.get("mismatches"):
                extra = '<ul class="mm">' + "".join(f"<li>{html.escape(str(m))}</li>" for m in cell["mismatches"]) \
                    + "</ul>"
            for note in cell.get("notes") or []:
                extra += f'<div class="small">note: {html.escape(str(note))}</div>'
            for failure in cell.get("rig_failures") or []:
                extra += f'<div class="rigwhy">rig: {html.escape(str(failure))}</div>'
            rig_heads = set(cell.get("rig_failures") or [])
            for reason in [r for r in cell.get("unknown_reasons") or [] if headline(r) not in rig_heads][:3]:
                extra += f'<div class="small">{html.escape(headline(reason))}</div>'
            if cell.get("run_dir"):
                extra += f'<div class="small">run dir: <code>{html.escape(str(cell["run_dir"]))}</code></div>'
            tds.append(f'<td><span class="status">{STATUS_TEXT[status]}</span>{extra}</td>')
        elif key == "preset":
            tds.append(f"<td>{_spec_html(str(cell.get('preset')), own)}</td>")
        elif key == "fault":
            specs = "".join(_spec_html(n, p) for n, p in per_fault.items()) or _spec_html("none", {})
            tds.append(f"<td>{specs}</td>")
        elif key == "params":
            shown = "<br>".join(f"{html.escape(k)}={html.escape(v)}" for k, v in parts.items()) or "-"
            tds.append(f'<td class="spec">{shown}</td>')
        elif key == "wrong_final_state_runs":
            tds.append(f'<td class="num">{html.escape(str(cell.get(key, "?")))}/{html.escape(str(cell.get("runs")))}</td>')
        elif key == "expected":
            tds.append(f'<td class="small">{html.escape(str(cell.get(key) or "(no row)"))}</td>')
        else:
            css = ' class="num"' if key in NUMERIC else ""
            tds.append(f"<td{css}>{html.escape(str(cell.get(key, '?')))}</td>")
    tip = html.escape(str(cell.get("reproduce") or ""), quote=True)
    return f'<tr class="{status}" title="{tip}">{"".join(tds)}</tr>'


def _fault_label(fault: object) -> str:
    if fault is None:
        return "none"
    if isinstance(fault, (list, tuple)):
        return "+".join(map(str, fault)) or "none"
    return str(fault)


def _coverage_html(cov: Mapping[str, Any]) -> str:
    presets, faults, rows = cov["presets"], cov["faults"], cov["rows"]
    head = "".join(f'<th class="f">{html.escape(f)}</th>' for f in faults)
    body = []
    for preset in presets:
        tds = []
        for fault in faults:
            n = rows.get(preset, {}).get(fault, 0)
            tds.append(f'<td class="has" title="{html.escape(preset)} x {html.escape(fault)}: {n} row(s)">{n}</td>'
                       if n else f'<td class="gap" title="{html.escape(preset)} x {html.escape(fault)}: no row">'
                                 '&middot;</td>')
        body.append(f"<tr><th>{html.escape(preset)}</th>{''.join(tds)}</tr>")
    total = len(presets) * len(faults)
    return (f'<h2 id="coverage">Coverage: {total - len(cov["uncovered"])} of {total} preset x fault pairs have '
            f"a row</h2>\n<p class=\"small\">A number is how many rows (parameter sets) the expectation table has "
            f"for the pair; a dot is a pair nobody has stated an expectation for.</p>\n"
            f'<table class="cov"><tr><th>preset \\ fault</th>{head}</tr>\n' + "\n".join(body) + "\n</table>\n")


def _skipped_html(skipped: list[Mapping[str, Any]]) -> str:
    reasons: dict[str, list[Mapping[str, Any]]] = {}
    for item in skipped:
        reasons.setdefault(str(item.get("reason")), []).append(item)
    parts = []
    for reason, items in reasons.items():
        names = ", ".join(sorted({f"{i.get('preset')} x {i.get('fault')}" for i in items}))
        noun = "cell" if len(items) == 1 else "cells"
        parts.append(f"<li>{len(items)} {noun} {html.escape(reason)}: "
                     f'<span class="small">{html.escape(names)}</span></li>')
    rows = "row" if len(skipped) == 1 else "rows"
    return f'<h2 id="not-run">Not run here ({len(skipped)} {rows})</h2>\n<ul>{"".join(parts)}</ul>\n'


def render_matrix(cells: Iterable[Mapping[str, Any]], title: str = "Chaos matrix",
                  coverage_info: Mapping[str, Any] | None = None,
                  skipped: list[Mapping[str, Any]] | None = None) -> str:
    """The whole page as a string: a table per area (in first-seen order), then coverage."""
    from chaos.report.rows import blame_summary
    cells = [dict(c) for c in cells]
    for cell in cells:
        if "preset" not in cell:
            raise ValueError(f"matrix cell without 'preset' (keys: {sorted(cell)}); pass rows of "
                             "chaos.report.matrix.matrix_cell / chaos.report.rows.cell_row")
        cell["fault"] = _fault_label(cell.get("fault"))
    tally: dict[str, int] = {}
    areas: dict[str, list[dict]] = {}
    for cell in cells:
        tally[cell_status(cell)] = tally.get(cell_status(cell), 0) + 1
        areas.setdefault(str(cell.get("area") or "no row: run on their defaults"), []).append(cell)
    head = "".join(f"<th>{html.escape(t)}</th>" for t, _ in COLUMNS)
    sections = []
    for area, members in areas.items():
        counts = ", ".join(f"{sum(cell_status(c) == k for c in members)} {STATUS_TEXT[k]}"
                           for k in STATUS_TEXT if any(cell_status(c) == k for c in members))
        sections.append(f'<h2 id="area-{html.escape(area)}">{html.escape(area)} <span class="small">'
                        f"({len(members)} cells: {counts})</span></h2>\n<table><tr>{head}</tr>\n"
                        + "\n".join(_row_html(c) for c in members) + "\n</table>\n")
    summary = ", ".join(f"{tally.get(k, 0)} {STATUS_TEXT[k]}" for k in STATUS_TEXT
                        if k != "rig" or tally.get(k))      # a rig failure is named when there is one
    return (
        f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
        f"<p>{len(cells)} cells: {summary}. Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}.</p>\n"
        f'<p class="blame"><b>{html.escape(blame_summary(tally))}</b></p>\n'
        '<p class="legend"><span style="background:#e8f5e9">behaved as its row says</span>'
        '<span style="background:#ffebee">mismatch: the strategy broke</span>'
        '<span style="background:#fff3e0">rig broke: no strategy is to blame</span>'
        '<span style="background:#eeeeee">unknown verdict: the runs could not tell</span>'
        '<span>no row in the expectation table</span> Hover a line for the command that replays it.</p>\n'
        + "".join(sections) + (_skipped_html(skipped) if skipped else "")
        + (_coverage_html(coverage_info) if coverage_info else "") + "</body></html>\n"
    )


def write_matrix(cells: Iterable[Mapping[str, Any]], path: Path, title: str = "Chaos matrix",
                 coverage_info: Mapping[str, Any] | None = None,
                 skipped: list[Mapping[str, Any]] | None = None) -> Path:
    """Write the page (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_matrix(cells, title, coverage_info, skipped), encoding="utf-8")
    return path


def write_matrix_page(matrix: Mapping[str, Any], path: Path) -> Path:
    """The page for a matrix document (`{"cells": [...], "runs", "seed", "time_scale",
    "coverage"}`), with the document saved beside it as JSON to rebuild the page later."""
    if not isinstance(matrix, Mapping) or not isinstance(matrix.get("cells"), list):
        raise ValueError("write_matrix_page needs the matrix document {'cells': [...], ...}; "
                         "for a plain list of cells use write_matrix(cells, path)")
    settings = ", ".join(f"{k.replace('_', ' ')} {matrix[k]}" for k in ("topology", "runs", "seed", "time_scale")
                         if matrix.get(k) is not None)
    path = write_matrix(matrix["cells"], path, title=f"Chaos matrix ({settings})" if settings else "Chaos matrix",
                        coverage_info=matrix.get("coverage"), skipped=matrix.get("skipped"))
    path.with_suffix(".json").write_text(json.dumps(matrix, indent=2, default=str), encoding="utf-8")
    return path
