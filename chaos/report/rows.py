"""One summary row per cell: the figures a team reads first, in one shape everywhere.

The terminal summary, ``--chaos-summary`` JSON and the matrix JSON/page all use
``cell_row``, so the nightly merge can concatenate the ``cells`` lists of any of them.

Each row says who is to blame in ``outcome``: ``match`` (the cell behaved as its row says),
``mismatch`` (the strategy broke its expectation), ``rig`` (the framework's own parts failed:
``rig_failures`` names each component and what happened to it; no strategy is to blame),
``unknown`` (the runs could not vouch for themselves for another reason, such as a worker
that died outside a fault or a drain that stalled: Jepsen's "could not tell") or ``none``
(no row judges the cell).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from chaos.results import UNKNOWN, CellResult
from chaos.cellspec import NO_FAULT, CellSpec
from chaos.expectations.table import Expectation, key_spec

SCHEMA_VERSION = 1
ROW_KEYS = ("area", "preset", "fault", "params", "runs", "lost", "duplicated", "reordered",
            "wrong_final_state_runs", "pending_left", "unattempted", "verdict", "expected", "match", "wall_s")
BLAME_KEYS = ("outcome", "rig_failures", "unknown_reasons")   # after ROW_KEYS in every row
REPLAY_KEY = "reproduce"   # after BLAME_KEYS: the command that replays the cell (chaos/replay.py)
MATCH, MISMATCH, RIG, UNKNOWN_OUTCOME, NO_ROW = "match", "mismatch", "rig", "unknown", "none"
OUTCOMES = (MATCH, MISMATCH, RIG, UNKNOWN_OUTCOME, NO_ROW)


def headline(failure: str) -> str:
    """A rig failure (or an unknown reason) in one line, component first (``run 0: proxy server (pid 9) died: killed
    by SIGKILL``): its first line without the log tail that follows it."""
    first = str(failure).strip().splitlines()[0] if str(failure).strip() else "(no reason recorded)"
    return re.sub(r"[;,:]?\s*log tail:?\s*$", "", first).rstrip(" ;:")


def outcome(*, verdict: Any, rig_failures: Iterable[str], expected: Any, match: bool | None) -> str:
    """Who is to blame for a cell (see the module doc). A rig failure wins over everything (its
    figures cannot be trusted); an unknown verdict is ``unknown`` unless the row bounds the
    verdict and that bound holds; otherwise the row's judgement."""
    if list(rig_failures or ()):
        return RIG
    bounds = getattr(expected, "bounds", expected) if expected is not None else {}
    if verdict == UNKNOWN and not (match and isinstance(bounds, Mapping) and "verdict" in bounds):
        return UNKNOWN_OUTCOME
    if expected is None or match is None:
        return NO_ROW
    return MATCH if match else MISMATCH


def cell_outcome(row: Mapping[str, Any]) -> str:
    """A row's ``outcome``; derived from its other keys for a row written without one."""
    found = row.get("outcome")
    if found in OUTCOMES:
        return str(found)
    if row.get("rig_failures"):
        return RIG
    expected = row.get("expected")
    match = row.get("match", row.get("matches_expectation") if expected is not None else None)
    if row.get("verdict") == UNKNOWN and not (match is True and "verdict" in str(expected or "")):
        return UNKNOWN_OUTCOME
    if expected is None or match is None:
        return NO_ROW
    return MATCH if match else MISMATCH


def expected_text(expected: Expectation | Mapping[str, Any] | None) -> str | None:
    """The bounds in one short line (``lost >= runs, duplicated == 0``), or None without a row;
    `expected` is a row or its JSON form (``run --json``'s ``expected``: bound texts by name)."""
    if expected is None:
        return None
    if isinstance(expected, Mapping):
        return ", ".join(f"{k} {v}" for k, v in expected.items() if k != "note")
    return ", ".join(f"{name} {bound.describe(None)}" for name, bound in expected.bounds.items())


def cell_row(result: CellResult, spec: CellSpec, *, area: str, expected: Expectation | None,
             reproduce: str | None = None) -> dict[str, Any]:
    """The summary row of one cell: `spec`'s key (the preset's parameters, the faults' as
    ``<fault>.<k>``, replaced parts by slot name in ``params``) and the result's figures.
    `reproduce`: the command that replays the cell (CellSpec.replay)."""
    preset_name, fault_name, params = spec.key
    counts = result.counts
    wall = getattr(result, "wall_s", None)
    match = None if expected is None else not expected.check(result)
    rig = list(getattr(result, "rig_failures", None) or [])
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
        "unattempted": counts.unattempted,
        "verdict": result.verdict,
        "expected": expected_text(expected),
        "match": match,
        "wall_s": None if wall is None else round(float(wall), 3),
        "outcome": outcome(verdict=result.verdict, rig_failures=rig, expected=expected, match=match),
        "rig_failures": [headline(f) for f in rig],
        "unknown_reasons": list(result.unknown_reasons),
        REPLAY_KEY: reproduce,
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
                 ("wrong", "wrong_final_state_runs"), ("pending", "pending_left"), ("unatt", "unattempted"),
                 ("verdict", "verdict"),
                 ("expected", "expected"), ("result", "outcome"))
RESULT_TEXT = {MATCH: "yes", MISMATCH: "NO", RIG: "RIG", UNKNOWN_OUTCOME: "UNKNOWN", NO_ROW: "-"}


def _spec_texts(row: Mapping[str, Any]) -> tuple[str, str]:
    """(``s1:wait_ms=25 +workload``: the preset's own params and the replaced parts' slots,
    ``kill-consumer+promote-replica:at_ms=0``: each fault with its own params), from the row's key."""
    spec = key_spec(str(row.get("preset")), row.get("fault") or NO_FAULT, row.get("params") or {})
    return spec.preset_text + "".join(f" +{slot}" for slot in spec.part_texts), spec.fault_text


def _cell_text(key: str, row: Mapping[str, Any]) -> str:
    value = row.get(key)
    if key == "wrong_final_state_runs":
        return f"{value}/{row.get('runs')}"
    if key == "outcome":
        return RESULT_TEXT[cell_outcome(row)]
    if key == "expected":
        return value or "(no row)"
    if key in ("preset", "fault"):
        return _spec_texts(row)[key == "fault"]
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


def cell_label(row: Mapping[str, Any]) -> str:
    """``<test id> (s1 x kill-consumer:at_ms=5)``, or ``<area> s1 x ...`` for a row without a test."""
    spec = " x ".join(_spec_texts(row))
    return f"{row['test']} ({spec})" if row.get("test") else f"{row.get('area') or '-'} {spec}"


def blame_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """A line per cell whose strategy is not to blame: ``RIG BROKE`` with each component and
    what happened to it, or ``COULD NOT TELL`` with the runs' unknown reasons."""
    out = []
    for row in rows:
        kind = cell_outcome(row)
        if kind == RIG:
            why = "; ".join(headline(f) for f in row.get("rig_failures") or []) or "(no reason recorded)"
            out.append(f"RIG BROKE {cell_label(row)}: {why}")
        elif kind == UNKNOWN_OUTCOME:
            reasons = list(row.get("unknown_reasons") or [])
            why = "; ".join(headline(r) for r in reasons[:3]) or "no reason recorded"
            more = f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else ""
            out.append(f"COULD NOT TELL {cell_label(row)}: {why}{more}")
    return out


def outcome_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many rows of each outcome, every outcome present (``{"match": 3, "mismatch": 0, ...}``)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for row in rows:
        counts[cell_outcome(row)] += 1
    return counts


def blame_summary(counts: Mapping[str, int]) -> str:
    """Who broke what, in one sentence: the strategies (mismatches) apart from the rig."""
    strategy, rig, unknown = (int(counts.get(k, 0)) for k in (MISMATCH, RIG, UNKNOWN_OUTCOME))
    if not (strategy or rig or unknown):
        return "Nothing broke: every judged cell behaved as its row says."
    parts = [f"strategy broke: {strategy} cell(s) left their expectation" if strategy
             else "strategy broke: none (no cell left its expectation)"]
    if rig:
        parts.append(f"rig broke: {rig} cell(s), the framework's own parts failed (no strategy is to blame)")
    if unknown:
        parts.append(f"could not tell: {unknown} cell(s) with an unknown verdict")
    return "; ".join(parts) + "."
