"""The matrix: the expectation table run cell by cell, and its static page.

`plan_cells` turns the table's rows (or a presets x faults selection) into cells to run,
each with its own parameters and the expectation that judges it. `matrix_cell` gives the
summary row of a ran cell (seam R's keys: the same rows as the terminal summary and
`--chaos-summary`, so the nightly merge concatenates them) plus what the page explains
with (mismatches, notes, replay command). `coverage` says which preset x fault pairs
the table has no row for.

The page lays each area out like the README's expectation table, one line per cell with
its figures, colour by what matters: a cell that behaved as its row says is green (also a
known-broken strategy that broke), a mismatch (the strategy broke) red, a rig failure (the
framework's own parts broke: the component and what happened to it) orange, an unknown
verdict (the runs could not tell) grey, a cell without a row white; then the coverage grid,
so what is not covered is visible.
"""
from __future__ import annotations

import html
import importlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.cellspec import NO_FAULT, CellSpec, split_faults

ROW_KEYS = ("area", "preset", "fault", "params", "runs", "lost", "duplicated", "reordered",
            "wrong_final_state_runs", "pending_left", "unattempted", "verdict", "expected", "match", "wall_s")
# beside the row keys, kept from the `run --json` object for the page and for people
EXTRA_KEYS = ("published", "redelivered", "recovered", "dlq", "unexpected", "unsettled_keys", "mismatches",
              "unknown_reasons", "notes", "reproduce", "run_dir", "seed", "time_scale")
DEFAULT_RUNS = 3  # a row whose area module does not say how many runs its cell takes
# Faults that only work on another topology than the default replica one (see docs/cluster.md).
FAULT_TOPOLOGY = {"sentinel-failover": "sentinel"}
STATUS_TEXT = {"match": "matches", "mismatch": "MISMATCH", "rig": "RIG BROKE", "unknown": "unknown",
               "none": "no row"}


@dataclass(frozen=True)
class PlannedRow:
    """One matrix entry to run: the cell's spec, its area, and the row that judges it (or None)."""

    area: str
    spec: CellSpec                    # preset, faults and parts parsed; runs = the area's count
    expected: Any = None              # chaos.expectations.Expectation | None
    unfit: str = ""                   # why a fault refuses this preset (a pair without a row): not run

    @property
    def preset(self) -> str:
        return self.spec.preset_text  # "s1:paid_at_ms=300"

    @property
    def faults(self) -> tuple[str, ...]:
        return tuple(self.spec.fault_texts)   # ("publish-blip:at=before_publish",), () for none

    @property
    def parts(self) -> dict[str, str]:
        return self.spec.part_texts

    @property
    def runs(self) -> int:
        return self.spec.runs

    @property
    def fault(self) -> str:
        return self.spec.fault_text

    @property
    def topology(self) -> str | None:
        """The topology the cell needs (`sentinel`), None when any topology runs it."""
        for spec in self.spec.faults:
            needed = FAULT_TOPOLOGY.get(spec.name)
            if needed:
                return needed
        return None


def split_by_topology(cells: Iterable[PlannedRow], topology: str) -> tuple[list[PlannedRow], list[dict]]:
    """(cells this topology runs, the others as `{area, preset, fault, parts, reason}`)."""
    runnable, skipped = [], []
    for cell in cells:
        if cell.unfit:
            skipped.append({"area": cell.area, "preset": cell.preset, "fault": cell.fault, "parts": dict(cell.parts),
                            "reason": cell.unfit})
        elif cell.topology is None or cell.topology == topology:
            runnable.append(cell)
        else:
            skipped.append({"area": cell.area, "preset": cell.preset, "fault": cell.fault, "parts": dict(cell.parts),
                            "reason": f"needs --topology {cell.topology} (this run: {topology})"})
    return runnable, skipped


def _cell_runs(area: str) -> dict[tuple, int]:
    """Row key -> the run count the area module's cells give it (modules without CELLS: none)."""
    try:
        module = importlib.import_module(f"chaos.expectations.{area}")
    except ModuleNotFoundError:
        return {}
    out = {}
    for cell in getattr(module, "CELLS", None) or []:
        try:
            out[cell.row().cell_key] = int(cell.runs)
        except (AttributeError, TypeError, ValueError):
            continue
    return out


def check_area(area: str | None) -> None:
    from chaos.errors import BadArguments
    from chaos.expectations import AREA_MODULES
    if area is not None and area not in AREA_MODULES:
        raise BadArguments(f"--area {area}: no such area; areas are: {', '.join(AREA_MODULES)}")


def plan_cells(area: str | None = None, presets: Iterable[str] = (), faults: Iterable[str] = ()) -> list[PlannedRow]:
    """The cells `chaos matrix` runs, in table order.

    Without presets and faults: every row of the table (of `area` when given), each with its
    own parameters and its area's run count. With presets and/or faults: the rows of those
    pairs (a missing list means all); a pair the table has no row for runs on its defaults,
    without an expectation (unless an area is given: then only rows run).
    """
    from chaos.expectations import table
    check_area(area)
    presets, faults = list(presets), list(faults)
    rows = [r for r in table().rows() if area is None or r.area == area]
    runs_of: dict[str, dict[tuple, int]] = {}

    def planned(r: Any) -> PlannedRow:
        counts = runs_of.setdefault(r.area, _cell_runs(r.area))
        return PlannedRow(r.area, r.spec().but(runs=counts.get(r.cell_key, DEFAULT_RUNS)), r.expectation)

    if not presets and not faults:
        return [planned(r) for r in rows]
    from chaos.strategies.presets import preset_names
    from faults.registry import fault_names
    presets = presets or preset_names()
    faults = faults or list(dict.fromkeys(["none", *fault_names()]))
    out = []
    for preset in presets:
        for fault in faults:
            spec = CellSpec.parse(preset, () if fault == NO_FAULT else split_faults(fault), runs=DEFAULT_RUNS)
            matching = [r for r in rows if r.preset == spec.preset.name and r.fault == spec.fault_names]
            if matching and not spec.preset.params and not any(f.params for f in spec.faults):
                out += [planned(r) for r in matching]
            elif area is None:
                from chaos.expectations import expect_cell
                out.append(PlannedRow("", spec, expect_cell(spec), _unfit(spec)))
    return out


def _unfit(spec: CellSpec) -> str:
    """Why a fault refuses this preset (long-job on a preset that never claims), else ""."""
    from chaos.errors import BadArguments
    from chaos.strategies.presets import resolve
    from faults.interface import Plan
    from faults.registry import make_fault
    try:
        plan = Plan(strategy=resolve(spec.preset))
        for fault in spec.faults:
            make_fault(fault).check(plan)
    except BadArguments as exc:
        return str(exc)
    return ""


def coverage(presets: Iterable[str] | None = None, faults: Iterable[str] | None = None) -> dict:
    """Which preset x fault pairs the table has rows for: `{"presets", "faults", "rows":
    {preset: {fault: n}}, "uncovered": [[preset, fault], ...]}` (multi-fault rows count
    for each of their faults)."""
    from chaos.expectations import table
    from chaos.strategies.presets import preset_names
    from faults.registry import fault_names
    presets = list(presets or preset_names())
    faults = list(dict.fromkeys(faults or ["none", *fault_names()]))
    rows: dict[str, dict[str, int]] = {}
    for r in table().rows():
        for fault in r.fault_names:
            per = rows.setdefault(r.preset, {})
            per[fault] = per.get(fault, 0) + 1
    uncovered = [[p, f] for p in presets for f in faults if not rows.get(p, {}).get(f)]
    return {"presets": presets, "faults": faults, "rows": rows, "uncovered": uncovered}


def matrix_cell(out: Mapping[str, Any], *, area: str, expected: Any, parts: Mapping[str, str] | None = None,
                spec: CellSpec | None = None) -> dict:
    """The summary row (seam R keys) of a cell from its `run --json` object, plus EXTRA_KEYS;
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
