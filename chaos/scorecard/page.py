"""The scorecard's pages: DIR/index.html (property x fault grid, each square a link to the
cell's page) and DIR/cells/<n>.html (the plots, the evidence, the replay command, what the
consumer behaves like). Plain HTML and PNG, no script, readable from a CI artifact."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from chaos.cellspec import Spec
from chaos.scorecard.plots import plot_run

COLOURS = {"pass": "#3c9a4f", "fail": "#d0453b", "unknown": "#a3a3a3"}
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 8px} .sub{color:#555;font-size:13px}
table.grid{border-collapse:separate;border-spacing:3px;margin-top:14px}
table.grid th{font-size:12px;font-weight:600;text-align:left;padding:2px 6px;white-space:nowrap}
table.grid th.fault{writing-mode:vertical-rl;transform:rotate(180deg);height:190px;vertical-align:bottom}
table.grid td a{display:block;width:30px;height:26px;border-radius:4px}
table.grid td.prop{font-size:13px;padding-right:10px;white-space:nowrap}
.legend span{display:inline-block;width:12px;height:12px;border-radius:3px;margin:0 4px 0 12px;vertical-align:-1px}
table.ev{border-collapse:collapse;font-size:13px} table.ev td,table.ev th{border-bottom:1px solid #ddd;
padding:4px 8px;text-align:left;vertical-align:top} .badge{color:#fff;border-radius:3px;padding:1px 6px;font-size:12px}
pre{background:#f4f4f4;padding:8px;white-space:pre-wrap;font-size:12px} .like{font-size:15px;margin:10px 0}
ul.skip{font-size:12px;color:#555}
"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _badge(status: str) -> str:
    return f"<span class='badge' style='background:{COLOURS[status]}'>{status}</span>"


def write_pages(card: Any, out: Path) -> Path:
    """Write index.html, one page and its plot per cell, and scorecard.json; returns index.html."""
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    for i, cell in enumerate(card.cells):
        (cells_dir / f"{i:02d}.html").write_text(cell_page(card, cell, i, cells_dir), encoding="utf-8")
    (out / "scorecard.json").write_text(json.dumps(card.to_json(), indent=1, default=str), encoding="utf-8")
    index = out / "index.html"
    index.write_text(index_page(card), encoding="utf-8")
    return index


def index_page(card: Any) -> str:
    data = card.to_json()
    props = list(card.cells[0].grades) if card.cells else []
    head = "".join(f"<th class='fault' title='{html.escape(c.fault)}'>{html.escape(_short(c.planned.run))}</th>"
                   for c in card.cells)
    rows = []
    for p in props:
        mark = " *" if p in card.promised else ""
        tds = "".join(
            f"<td><a href='cells/{i:02d}.html' style='background:{COLOURS[c.grades[p].status]}' "
            f"title='{html.escape(c.fault)}: {p} {c.grades[p].status}: {html.escape(c.grades[p].evidence)}'></a></td>"
            for i, c in enumerate(card.cells))
        rows.append(f"<tr><td class='prop'>{p}{mark}</td>{tds}</tr>")
    skipped = "".join(f"<li>{html.escape(s['fault'])}: {html.escape(s['why'])}</li>" for s in data["skipped"])
    likes = "".join(f"<li><a href='cells/{i:02d}.html'>{html.escape(c.fault)}</a>: behaves {html.escape(c.like)}</li>"
                    for i, c in enumerate(card.cells))
    verdict = {0: "every promise of [expect] holds", 1: "a promise of [expect] breaks",
               2: "a promised property could not be judged"}[data["summary"]["exit_code"]]
    body = (f"<h1>Scorecard: <code>{html.escape(card.command)}</code></h1>"
            f"<div class='sub'>config {html.escape(card.config_path)} &middot; topology {card.topology} &middot; "
            f"{card.runs} run(s) per fault, seed {card.seed} &middot; {len(card.cells)} cells in "
            f"{card.wall_s:.0f} s &middot; {verdict} (* = promised by [expect])</div>"
            f"<div class='sub legend'>{''.join(f'<span style=background:{v}></span>{k}' for k, v in COLOURS.items())}"
            f"</div><table class='grid'><tr><th></th>{head}</tr>{''.join(rows)}</table>"
            + f"<h2>Cells</h2><ul class='skip'>{likes}</ul>"
            + (f"<h2>Left out</h2><ul class='skip'>{skipped}</ul>" if skipped else "")
            + "<div class='sub'>Each square links to the cell: its plots, evidence and replay command. "
              "scorecard.json has the same data.</div>")
    return _page("scorecard", body)


def _short(spec: Spec) -> str:
    """A column head: the fault's name and, where one fault gives several cells, what tells them apart."""
    keep = [v for k, v in spec.params if k in ("link", "mode")]
    return spec.name + (f" ({', '.join(keep)})" if keep else "")


def _evidence(text: str) -> str:
    """One line as text; a log tail (several lines) folded, its last line shown."""
    first, _, rest = text.partition("\n")
    if not rest:
        return html.escape(first)
    lines = rest.strip().splitlines()
    return (html.escape(first) + f"<details><summary>log tail ({len(lines)} lines)</summary>"
            f"<pre>{html.escape(rest)}</pre></details>" + html.escape(lines[-1]))


def cell_page(card: Any, cell: Any, i: int, cells_dir: Path) -> str:
    plots = []
    for n, samples in enumerate(cell.samples):   # every run's curves (run n: seed = the card's seed + n)
        history = cell.cell.runs[n].history if cell.cell is not None and n < len(cell.cell.runs) else []
        try:
            png = plot_run(samples, history, cells_dir / f"{i:02d}-run{n}.png",
                           f"{cell.fault}, run {n} (seed {card.seed + n})")
        except ImportError:     # matplotlib is the `plots` extra: the page says how to get the curves
            plots.append("<div class='sub'>No plots: matplotlib is not installed "
                         "(pip install 'redis-streams-chaos[plots]').</div>")
            continue
        if png is not None:
            plots.append(f"<h2>Run {n} (seed {card.seed + n})</h2>"
                         f"<img src='{png.name}' alt='plots of run {n}' style='max-width:100%'>")
    ev = "".join(f"<tr><td>{p}</td><td>{_badge(g.status)}</td><td>{_evidence(g.evidence)}"
                 + (f"<br><small>{'<br>'.join(html.escape(e) for e in g.examples)}</small>" if g.examples else "")
                 + "</td></tr>" for p, g in cell.grades.items())
    counts = ", ".join(f"{k} {v}" for k, v in cell.counts().items())
    broken = "".join(f"<li>{html.escape(m)}</li>" for m in cell.mismatches)
    body = (f"<p><a href='../index.html'>&larr; scorecard</a></p><h1>{html.escape(cell.fault)}</h1>"
            f"<div class='like'>Behaves {html.escape(cell.like)}</div>"
            + (f"{''.join(plots)}<div class='sub'>Shaded: the fault window. Grey ticks: a sample Redis did "
               f"not answer. Dashed purple: a poison entry published.</div>" if plots else "")
            + f"<h2>Properties</h2><table class='ev'><tr><th>property</th><th></th><th>evidence</th></tr>{ev}</table>"
            + (f"<h2>Broken [expect] promises</h2><ul>{broken}</ul>" if broken else "")
            + f"<h2>Counts (runs: {len(cell.cell.runs) if cell.cell else 0})</h2><div class='sub'>{html.escape(counts)}</div>"
            + f"<h2>Replay</h2><pre>{html.escape(cell.reproduce)}</pre>"
            + (f"<h2>Error</h2><pre>{html.escape(cell.error)}</pre>" if cell.error else ""))
    return _page(cell.fault, body)


def markdown_grid(data: dict) -> str:
    """The grid of a scorecard.json as a Markdown table (docs/scorecard.md's tables); faults by
    name (and link or mode), their parameters are the catalogue's."""
    cells = data["cells"]
    props = list(cells[0]["properties"]) if cells else []
    figures = {"no_loss": "lost", "no_duplicate_side_effects": "duplicated_side_effects",
               "final_state": "wrong_keys", "keeps_consuming": "undelivered", "pel_drains": "pending_left"}
    lines = ["| fault | " + " | ".join(props) + " | behaves like |", "|---" * (len(props) + 2) + "|"]
    for c in cells:
        row = []
        for p in props:
            status = c["properties"][p]
            figure = figures.get(p)
            value = c["counts"].get(figure) if figure else None
            if status == "fail":
                row.append("**fail**" + (f" ({figure} {value})" if value else ""))
            else:
                row.append(status)
        like = c["behaves_like"].removeprefix("like ")
        head = _short(Spec.parse(c["fault"], "scorecard.json fault"))
        lines.append(f"| {head} | " + " | ".join(row) + f" | {like} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(prog="python -m chaos.scorecard.page",
                                     description="print a scorecard's grid as a Markdown table")
    parser.add_argument("scorecard_json", help="DIR/scorecard.json, as `python -m chaos scorecard --out DIR` writes")
    print(markdown_grid(json.loads(Path(parser.parse_args().scorecard_json).read_text(encoding="utf-8"))))
