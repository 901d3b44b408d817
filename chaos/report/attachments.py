"""The older Allure helpers (superseded by chaos.report.allure_cell.report_cell, which the
cell runner calls): attachments for a cell: the JSON summary, and per chosen run its history as text,
its timeline PNG and its trace. A no-op when allure-pytest is not reporting (no
`--alluredir`), so suites can call it unconditionally without paying for the plots.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chaos.checker import CellResult
from chaos.history import HistoryError, format_history, read_history
from chaos.report.allure_cell import MAX_RUNS_ATTACHED, allure_active, chosen_runs, trace_text


def label_cell(preset: str, fault: str, seed: int | None = None, runs: int | None = None) -> None:
    """Allure parameters for a cell test; the seed is excluded from the history id so that a
    nightly run with a new seed continues the same test's history."""
    if not allure_active():
        return
    import allure

    allure.dynamic.parameter("preset", preset)
    allure.dynamic.parameter("fault", fault)
    if runs is not None:
        allure.dynamic.parameter("runs", runs)
    if seed is not None:
        allure.dynamic.parameter("seed", seed, excluded=True)
    allure.dynamic.tag(preset, fault)


def attach_cell(cell: CellResult, run_dirs: Iterable[Path] | None = None, *,
                context: dict[str, Any] | None = None, limit: int = MAX_RUNS_ATTACHED) -> list[str]:
    """Attach the summary and up to `limit` runs' history, timeline and trace to the current
    Allure test; returns the attachment names (empty when Allure is not active).

    `run_dirs[i]` is run i's directory (default: `cell.run_dirs`, set by chaos.run); runs
    whose directory was already tidied away are skipped.
    """
    if not allure_active():
        return []
    import allure

    from chaos.report.timeline import plot_timeline

    names = []
    summary = json.dumps(cell.to_json(**dict(context or {})), indent=2, default=str)
    allure.attach(summary, name="cell.json", attachment_type=allure.attachment_type.JSON)
    names.append("cell.json")
    dirs = list(run_dirs if run_dirs is not None else getattr(cell, "run_dirs", []) or [])
    for index in chosen_runs(cell, limit):
        if index >= len(dirs):
            continue
        try:
            history = read_history(Path(dirs[index]))
        except HistoryError:
            continue  # tidied away (a valid run) or never started
        run = cell.runs[index]
        tag = f"run {run.run} ({run.verdict})"
        allure.attach(format_history(history), name=f"{tag} history.txt",
                      attachment_type=allure.attachment_type.TEXT)
        allure.attach(trace_text(history), name=f"{tag} trace.txt", attachment_type=allure.attachment_type.TEXT)
        names += [f"{tag} history.txt", f"{tag} trace.txt"]
        if history:
            png = plot_timeline(history, title=f"{tag}, seed {run.seed}")
            allure.attach(png, name=f"{tag} timeline.png", attachment_type=allure.attachment_type.PNG)
            names.append(f"{tag} timeline.png")
    return names
