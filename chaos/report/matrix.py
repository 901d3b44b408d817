"""The static matrix page: presets down, faults across, one verdict and its counts per cell.

The page answers "which cells broke" at a glance, and broke means *against the
expectation*: a known-broken strategy that breaks as expected is green, a correct one
that held is green, a cell that did not match is red, unknown is grey, and a cell the
table lacks is white. Input is the `run --json` objects (CellResult.to_json), so the
page can be rebuilt from saved JSON without rerunning anything.
"""
from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable
from pathlib import Path

SHOWN_COUNTS = ("published", "lost", "duplicated", "reordered", "unexpected", "recovered", "redelivered",
                "pending_left", "dlq", "unsettled_keys", "indeterminate")  # the last two explain a valid "wrong"
STATUS_CLASSES = {"match": "match", "mismatch": "mismatch", "unknown": "unknown", "none": "noexp"}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #212121; }
table { border-collapse: collapse; }
th, td { border: 1px solid #bdbdbd; padding: 6px 8px; vertical-align: top; font-size: 13px; }
th { background: #eeeeee; text-align: left; }
td.match { background: #e8f5e9; } td.mismatch { background: #ffebee; }
td.unknown { background: #eeeeee; } td.noexp { background: #ffffff; } td.empty { background: #fafafa; }
.verdict { font-weight: 600; } .verdict.invalid { color: #c62828; } .verdict.valid { color: #2e7d32; }
.verdict.unknown { color: #616161; } .counts { color: #424242; font-size: 12px; }
.mm { color: #b71c1c; font-size: 11px; margin: 2px 0 0 0; padding-left: 1em; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; border: 1px solid #bdbdbd; }
"""


def cell_status(cell: dict) -> str:
    """`match`, `mismatch`, `unknown` (the runs cannot vouch) or `none` (no expectation)."""
    if cell.get("verdict") == "unknown":
        return "unknown"
    if cell.get("expected") is None:
        return "none"
    return "match" if cell.get("matches_expectation") else "mismatch"


def _fault_label(fault: object) -> str:
    if fault is None:
        return "none"
    if isinstance(fault, (list, tuple)):
        return "+".join(map(str, fault)) or "none"
    return str(fault)


def _cell_html(cell: dict) -> str:
    status = cell_status(cell)
    verdict = str(cell.get("verdict", "?"))
    runs = cell.get("runs") or len(cell.get("per_run", [])) or "?"
    wrong = f"wrong {cell.get('wrong_final_state_runs', '?')}/{runs}"
    counts = " ".join(f"{name}={cell[name]}" for name in SHOWN_COUNTS if cell.get(name))
    mark = {"match": "matches", "mismatch": "MISMATCH", "unknown": "unknown", "none": "no expectation"}[status]
    parts = [f'<div class="verdict {html.escape(verdict)}">{html.escape(verdict)} &middot; {mark}</div>',
             f'<div class="counts">{html.escape(wrong)}<br>{html.escape(counts)}</div>']
    expected = cell.get("expected")
    if isinstance(expected, dict):
        bounds = ", ".join(f"{k} {v}" for k, v in expected.items() if k != "note")
        parts.append(f'<div class="counts">expected: {html.escape(bounds)}</div>')
    if cell.get("mismatches"):
        items = "".join(f"<li>{html.escape(m)}</li>" for m in cell["mismatches"])
        parts.append(f'<ul class="mm">{items}</ul>')
    if cell.get("unknown_reasons"):
        parts.append(f'<div class="counts">{html.escape("; ".join(cell["unknown_reasons"][:3]))}</div>')
    if cell.get("run_dir"):
        parts.append(f'<div class="counts">run dir: <code>{html.escape(str(cell["run_dir"]))}</code></div>')
    tip = html.escape(str(cell.get("reproduce") or ""), quote=True)
    return f'<td class="{STATUS_CLASSES[status]}" title="{tip}">{"".join(parts)}</td>'


def render_matrix(cells: Iterable[dict], title: str = "Chaos matrix") -> str:
    """The whole page as a string; presets and faults keep the order they first appear in."""
    cells = list(cells)
    for cell in cells:
        if "preset" not in cell:
            raise ValueError(f"matrix cell without 'preset' (keys: {sorted(cell)}); pass the objects "
                             "of CellResult.to_json(preset=..., fault=...)")
    presets = list(dict.fromkeys(str(c["preset"]) for c in cells))
    faults = list(dict.fromkeys(_fault_label(c.get("fault")) for c in cells))
    grid = {(str(c["preset"]), _fault_label(c.get("fault"))): c for c in cells}
    tally: dict[str, int] = {}
    for cell in cells:
        tally[cell_status(cell)] = tally.get(cell_status(cell), 0) + 1
    head = "".join(f"<th>{html.escape(f)}</th>" for f in faults)
    body = []
    for preset in presets:
        row = [f"<th>{html.escape(preset)}</th>"]
        for fault in faults:
            cell = grid.get((preset, fault))
            row.append(_cell_html(cell) if cell else '<td class="empty"></td>')
        body.append(f"<tr>{''.join(row)}</tr>")
    summary = ", ".join(f"{tally.get(k, 0)} {k}" for k in ("match", "mismatch", "unknown", "none"))
    return (
        f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
        f"<p>{len(cells)} cells: {summary}. Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}.</p>\n"
        '<p class="legend"><span style="background:#e8f5e9">matches its expectation</span>'
        '<span style="background:#ffebee">mismatch</span><span style="background:#eeeeee">unknown</span>'
        '<span>no expectation</span> Hover a cell for the command that replays it.</p>\n'
        f"<table><tr><th>preset \\ fault</th>{head}</tr>\n" + "\n".join(body) + "\n</table>\n</body></html>\n"
    )


def write_matrix(cells: Iterable[dict], path: Path, title: str = "Chaos matrix") -> Path:
    """Write the page (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_matrix(cells, title), encoding="utf-8")
    return path


def write_matrix_page(matrix: dict, path: Path) -> Path:
    """The page for a `matrix --json` document (`{"cells": [...], "runs", "seed",
    "time_scale"}`), with the document saved beside it as JSON to rebuild the page later."""
    if not isinstance(matrix, dict) or not isinstance(matrix.get("cells"), list):
        raise ValueError("write_matrix_page needs the matrix document {'cells': [...], ...}; "
                         "for a plain list of cells use write_matrix(cells, path)")
    settings = ", ".join(f"{k} {matrix[k]}" for k in ("runs", "seed", "time_scale") if matrix.get(k) is not None)
    path = write_matrix(matrix["cells"], path, title=f"Chaos matrix ({settings})" if settings else "Chaos matrix")
    path.with_suffix(".json").write_text(json.dumps(matrix, indent=2, default=str), encoding="utf-8")
    return path
