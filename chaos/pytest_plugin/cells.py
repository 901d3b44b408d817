"""The ``chaos_cell`` fixture (run a cell in a test, the same way in every suite) and the
per-cell summary at the end of the session (terminal table, ``--chaos-summary PATH``).

    def test_s5_survives_failover(chaos_cell):
        chaos_cell(preset_cell("s5"))       # chaos.expectations.failover's cell for s5

runs the cell on this worker's cluster with the session's runs, seed and time scale,
reports it to Allure, calls ``pytest_chaos_cell_finished(cell, result)`` (hookspecs.py),
asserts the expectation table's row for it, records its summary row
(report.user_properties, so xdist workers hand it to the controller). rundirs.py
removes a passing test's run dirs and names a failing test's. The controller (or the only
process, without xdist) collects the rows from the test reports. Below the table, one line
per cell no strategy is to blame for: ``RIG BROKE`` (the component and what happened to it)
or ``COULD NOT TELL`` (the runs' unknown reasons).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import pytest

from chaos.pytest_plugin import settings
from chaos.pytest_plugin.core import options_of

if TYPE_CHECKING:   # imported when a cell runs: a session without cells does not pay for them
    from chaos.cellrun import CellRun
    from chaos.expectations import Expectation
    from chaos.expectations.cells import Cell

ROW_PROPERTY = "chaos_cell"   # the name of a summary row in report.user_properties

_OUTCOMES = pytest.StashKey[list]()      # the CellRuns of one test


def suite_area(item: pytest.Item) -> str:
    """`suites/<area>/test_x.py` -> `<area>`; else the test file's directory name."""
    path = Path(str(item.path))
    for index in range(len(path.parts) - 3, -1, -1):
        if path.parts[index] == "suites":
            return path.parts[index + 1]
    return path.parent.name


class CellRunner:
    """What ``chaos_cell`` gives a test: call it with a Cell or a preset spec and fault spec(s)."""

    def __init__(self, item: pytest.Item, cluster: Any, options: Any) -> None:
        self._item, self._cluster, self._options = item, cluster, options

    def __call__(self, cell: Cell | str, faults: str | Sequence[str] = (), *, runs: int | None = None,
                 fixed_runs: bool = False, parts: Mapping[str, str] | None = None,
                 failpoints: Mapping[str, dict] | None = None, time_scale: float | None = None,
                 expected: Expectation | bool | None = True, check: bool = True,
                 histories: bool = False) -> CellRun:
        """Run the cell and (with `check`) assert its expectation; returns the CellRun.

        `runs`: the default run count (a Cell has its own; else 1), which ``--chaos-runs``
        overrides unless `fixed_runs`. `expected`: the table's row for the cell's parameters
        (True, chaos.cellrun.LOOK_UP: a cell without one fails: EXPECTATION MISSING), an
        Expectation, or False (no row judges it: the test asserts its own figures).
        `check=False`: call ``.check()`` yourself after the test's own checks (the test errors
        if it never does).
        """
        from chaos.cellrun import as_cell, run
        the_cell = as_cell(cell, faults, runs or 1, parts)
        outcome = run(the_cell, self._cluster, self._options, runs=runs, fixed_runs=fixed_runs,
                      time_scale=time_scale, failpoints=failpoints, expected=expected,
                      area=suite_area(self._item), histories=histories)
        self._item.stash.setdefault(_OUTCOMES, []).append(outcome)
        self._item.user_properties.append((ROW_PROPERTY, outcome.row))
        self._item.config.hook.pytest_chaos_cell_finished(cell=the_cell, result=outcome)
        outcome.vouch()       # a rig failure: RigFailure now, before the test reads figures that say nothing
        if check:
            outcome.check()
        return outcome


@pytest.fixture
def chaos_cell(request: pytest.FixtureRequest, chaos_reset_cluster: Any, chaos_options: Any) -> Iterator[CellRunner]:
    """Run cells on this worker's cluster (see CellRunner); a passing test must have asserted
    every judged cell."""
    yield CellRunner(request.node, chaos_reset_cluster, chaos_options)
    outcomes = request.node.stash.get(_OUTCOMES, [])
    report = request.node.stash.get(_CALL_REPORT, None)
    passed = report is not None and report.passed
    unchecked = [o for o in outcomes if o.judged and not o.checked]
    if passed and unchecked:
        first = unchecked[0]
        pytest.fail(f"cell {first.cell.preset} x {first.fault} ran with check=False and its expectation was never "
                    "asserted: call .check() on what chaos_cell returned", pytrace=False)


_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


# ---------------------------------------------------------------------------------------------
# the summary: one row per cell, in the terminal and as JSON
# ---------------------------------------------------------------------------------------------
class SummaryRows:
    """The session's summary rows by test id (a test's last report has them all); registered
    as a plugin on the controller, or on the only process without xdist."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rows: dict[str, list[dict]] = {}
        self.write_error: str | None = None

    def ordered(self) -> list[dict]:
        """By area, preset, fault and parameters: the same order with and without xdist."""
        every = [row for rows in self.rows.values() for row in rows]
        return sorted(every, key=lambda r: (r["area"], r["preset"], r["fault"],
                                            json.dumps(r["params"], sort_keys=True), r["test"]))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rows = [value for name, value in report.user_properties if name == ROW_PROPERTY]
        if rows:
            self.rows[report.nodeid] = [{**row, "test": report.nodeid} for row in rows]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the JSON after the other plugins wrote their results; a failure is reported,
        not raised (nothing else is lost), and fails the session."""
        if self.path is None:
            return
        from chaos.report.rows import write_summary
        try:
            write_summary(self.path, self.ordered())
        except OSError as exc:
            self.write_error = (f"--chaos-summary={self.path}: could not write the summary "
                                f"({exc.strerror or exc}); give a file path in an existing, writable "
                                "directory (the test results themselves were written)")
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        rows = self.ordered()
        if rows:
            from chaos.report.rows import blame_lines, table_lines
            options = options_of(config)
            seed = f" (seed {options.seed}: replay with --chaos-seed={options.seed})" if options else ""
            terminalreporter.write_sep("=", f"chaos cells: {len(rows)}{seed}")
            for line in table_lines(rows):
                terminalreporter.write_line(line)
            blamed = blame_lines(rows)
            rig = sum(line.startswith("RIG BROKE") for line in blamed)
            if blamed:
                terminalreporter.write_line(
                    f"chaos: no strategy is to blame for {len(blamed)} cell(s): the rig broke in {rig}, "
                    f"the runs could not tell in {len(blamed) - rig} (verdict unknown; run dirs kept)")
            for line in blamed:
                terminalreporter.write_line(line, red=line.startswith("RIG"), yellow=not line.startswith("RIG"),
                                            bold=True)
        if self.write_error is not None:
            terminalreporter.write_line(f"ERROR {self.write_error}", red=True, bold=True)
        elif self.path is not None:
            terminalreporter.write_line(f"chaos summary: {len(rows)} cells written to {self.path}")


@pytest.hookimpl(trylast=True)
def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-summary", metavar="PATH",
                 help='write one row per cell as JSON ({"schema_version": 1, "cells": [...]}) to PATH')


def check_summary_path(path: Path) -> None:
    """Raise UsageError now, before any test runs, when PATH cannot be written."""
    fix = "give a file path in an existing, writable directory, e.g. --chaos-summary=chaos-summary.json"
    if path.is_dir():
        raise pytest.UsageError(f"--chaos-summary={path}: that is a directory; {fix}")
    if not path.parent.is_dir():
        raise pytest.UsageError(f"--chaos-summary={path}: directory {path.parent} does not exist; {fix}")
    probe = path.with_name(f".{path.name}.{os.getpid()}.probe")
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(f"--chaos-summary={path}: cannot write in {path.parent} "
                                f"({exc.strerror or exc}); {fix}") from None


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # xdist workers hand their rows to the controller through the reports
    option = settings.value(config, "chaos_summary")
    path = Path(option).expanduser().absolute() if option else None
    if path is not None:
        check_summary_path(path)
    config.pluginmanager.register(SummaryRows(path), "chaos-cell-summary")
