"""The ordering suite's runner: run_cell on this worker's cluster with the session's knobs,
and the cell's summary, traces and timelines attached to Allure when it is reporting."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from chaos.checker import VALID, CellResult
from chaos.report.attachments import allure_active, attach_cell, label_cell
from chaos.run import run_cell


_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


@pytest.fixture
def run_preset(request: pytest.FixtureRequest, cluster: Any, chaos_options: Any) -> Callable[..., CellResult]:
    """`run_preset("s1", runs=10, **run_cell_kwargs)`; --chaos-runs overrides `runs` unless fixed_runs.

    Run dirs of runs that are not valid are kept while the test runs; when the test passes
    (a known-broken cell broke as expected) they are removed, when it fails they stay.
    """
    roots: list[Path] = []

    def tidy() -> None:
        report = request.node.stash.get(_CALL_REPORT, None)
        if report is not None and report.passed and not chaos_options.keep_runs:
            for root in roots:
                shutil.rmtree(root, ignore_errors=True)

    request.addfinalizer(tidy)

    def run(preset: str, runs: int, *, fixed_runs: bool = False, time_scale: float | None = None,
            **kw: Any) -> CellResult:
        count = runs if fixed_runs else (chaos_options.runs or runs)
        faults = kw.pop("faults", ())
        reporting = allure_active()
        keep = "always" if chaos_options.keep_runs or reporting else "failed"
        cell = run_cell(cluster, preset, faults, runs=count, seed=chaos_options.seed,
                        time_scale=time_scale or chaos_options.time_scale, keep_runs=keep, **kw)
        roots.append(cell.run_root)
        if reporting:
            fault = "+".join(faults) or "none"
            label_cell(preset, fault, seed=chaos_options.seed, runs=count)
            attach_cell(cell, context={"preset": preset, "fault": fault, "seed": chaos_options.seed,
                                       "time_scale": time_scale or chaos_options.time_scale})
            if not chaos_options.keep_runs:  # attached: now tidy the valid runs as run_cell would have
                for result, path in zip(cell.runs, cell.run_dirs, strict=True):
                    if result.verdict == VALID:
                        shutil.rmtree(path, ignore_errors=True)
        return cell

    return run
