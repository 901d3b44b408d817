"""One summary row per cell: the figures a team reads first, in one shape everywhere.

The terminal summary, ``--chaos-summary`` JSON and the matrix JSON/page all use
``cell_row``, so the nightly merge can concatenate the ``cells`` lists of any of them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from chaos.checker import CellResult
from chaos.expectations.table import Expectation, cell_name
from chaos.strategies.presets import SLOTS

SCHEMA_VERSION = 1
ROW_KEYS = ("area", "preset", "fault", "params", "runs", "lost", "duplicated", "reordered",
            "wrong_final_state_runs", "pending_left", "verdict", "expected", "match", "wall_s")


def expected_text(expected: Expectation | None) -> str | None:
    """The bounds in one short line (``lost >= runs, duplicated == 0``), or None without a row."""
    if expected is None:
        return None
    return ", ".join(f"{name} {bound.describe(None)}" for name, bound in expected.bounds.items())


def cell_row(result: CellResult, *, area: str, preset: str, fault: str | Iterable[str] | None,
             expected: Expectation | None, parts: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The row of one cell (seam R). `preset` and `fault` may carry parameters (``s2:shards=8``);
    they go to ``params`` (fault parameters as ``<fault>.<k>``, replaced parts by slot name)."""
    preset_name, fault_name, params = cell_name(preset, fault)
    params.update({str(k): str(v) for k, v in (parts or {}).items()})
    counts = result.counts
    wall = getattr(result, "wall_s", None)
    return {
        "area": area,
        "preset": preset_name,
        "fault": fault_name,
        "params": params,
        "runs": result.run_count,
        "lost": counts.lost,
        "duplicated": counts.duplicated,
        "reordered": counts.reordered,
        "wrong_final_state_runs": counts.wrong_final_state_runs,
        "pending_left": counts.pending_left,
        "verdict": result.verdict,
        "expected": expected_text(expected),
        "match": None if expected is None else not expected.check(result),
        "wall_s": None if wall is None else round(float(wall), 3),
    }


def summary_json(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"schema_version": 1, "cells": [...]}``, the document every cell list is written as."""
    return {"schema_version": SCHEMA_VERSION, "cells": [dict(r) for r in rows]}


def write_summary(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write the summary document (via a temp file, so a reader never sees half of it)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary_json(rows), indent=2, default=str) + "\n")
    tmp.replace(path)


TABLE_COLUMNS = (("area", "area"), ("preset", "preset"), ("fault", "fault"), ("runs", "runs"),
                 ("lost", "lost"), ("dup", "duplicated"), ("reord", "reordered"),
                 ("wrong", "wrong_final_state_runs"), ("pending", "pending_left"), ("verdict", "verdict"),
                 ("expected", "expected"), ("match", "match"))


def _spec_text(name: Any, params: Mapping[str, str], fault: bool) -> str:
    """``s1:wait_ms=25 +workload`` (the preset's own params, replaced parts) or, for faults,
    each fault with its own params (``<fault>.<k>``): ``kill-consumer+promote-replica:at_ms=0``."""
    if fault:
        specs = []
        for each in str(name).split("+"):
            own = ",".join(f"{k.split('.', 1)[1]}={v}" for k, v in params.items() if k.startswith(f"{each}."))
            specs.append(f"{each}:{own}" if own else each)
        return "+".join(specs)
    own = ",".join(f"{k}={v}" for k, v in params.items() if "." not in k and k not in SLOTS)
    parts = "".join(f" +{k}" for k in params if k in SLOTS)
    return f"{name}{':' + own if own else ''}{parts}"


def _cell_text(key: str, row: Mapping[str, Any]) -> str:
    value = row.get(key)
    params = row.get("params") or {}
    if key == "wrong_final_state_runs":
        return f"{value}/{row.get('runs')}"
    if key == "match":
        return {True: "yes", False: "NO", None: "-"}[value]
    if key == "expected":
        return value or "(no row)"
    if key == "preset":
        return _spec_text(value, params, fault=False)
    if key == "fault":
        return _spec_text(value, params, fault=True)
    return str(value)


def table_lines(rows: Iterable[Mapping[str, Any]], max_expected: int = 60) -> list[str]:
    """The rows as an aligned text table (one line per cell), for the terminal."""
    body = []
    for r in rows:
        cells = [_cell_text(key, r) for _, key in TABLE_COLUMNS]
        expected_at = [k for _, k in TABLE_COLUMNS].index("expected")
        if len(cells[expected_at]) > max_expected:
            cells[expected_at] = cells[expected_at][:max_expected - 3] + "..."
        body.append(cells)
    header = [title for title, _ in TABLE_COLUMNS]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *body]]
