"""The ordering suite's runner: run_cell on this worker's cluster with the session's knobs,
and the cell's summary, traces and timelines attached to Allure when it is reporting."""
from __future__ import annotations

import shutil
from typing import Any, Callable

import pytest

from chaos.checker import VALID, CellResult
from chaos.report.attachments import allure_active, attach_cell, label_cell
from chaos.run import run_cell


@pytest.fixture
def run_preset(cluster: Any, chaos_options: Any) -> Callable[..., CellResult]:
    """`run_preset("s1", runs=10, **run_cell_kwargs)`; --chaos-runs overrides `runs` unless fixed_runs."""

    def run(preset: str, runs: int, *, fixed_runs: bool = False, time_scale: float | None = None,
            **kw: Any) -> CellResult:
        count = runs if fixed_runs else (chaos_options.runs or runs)
        faults = kw.pop("faults", ())
        reporting = allure_active()
        keep = "always" if chaos_options.keep_runs or reporting else "failed"
        cell = run_cell(cluster, preset, faults, runs=count, seed=chaos_options.seed,
                        time_scale=time_scale or chaos_options.time_scale, keep_runs=keep, **kw)
        if reporting:
            fault = "+".join(faults) or "none"
            label_cell(preset, fault, seed=chaos_options.seed, runs=count)
            attach_cell(cell, context={"preset": preset, "fault": fault, "seed": chaos_options.seed,
                                       "time_scale": time_scale or chaos_options.time_scale})
            if not chaos_options.keep_runs:  # attached: now tidy the valid runs as run_cell would have
                for result, path in zip(cell.runs, cell.run_dirs):
                    if result.verdict == VALID:
                        shutil.rmtree(path, ignore_errors=True)
        return cell

    return run
