"""The one runner: a CellSpec run, judged and turned into its summary row, for the pytest
fixture, `python -m chaos run` and `python -m chaos matrix` alike.

``run_judged`` runs a CellSpec (chaos.orchestrator.run_spec), looks its expectation up (or
takes the one given) and returns a CellRun: the result, each run's history (read on demand
while the run dirs exist), the expectation, and the summary row (chaos.report.rows). ``run``
is the fixture's side: a Cell of an area module (or a preset spec) with the session's runs,
seed and time scale, reported to Allure.
The plugin's ``chaos_cell`` fixture (chaos/pytest_plugin/cells.py) wraps it and records the row
for the terminal summary; chaos/pytest_plugin/rundirs.py removes a passing test's run dirs.

Who is to blame when a cell does not pass: the strategy (AssertionError, EXPECTATION
MISMATCH: Allure *failed*), the rig (RigFailure, RIG FAILURE: *broken*), or nobody can tell
(UnknownVerdict, UNKNOWN: *broken*). reports/allurerc.json files each under its category.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from chaos.cellspec import CellSpec
from chaos.results import CellResult
from chaos.errors import RigFailure
from chaos.expectations import Expectation, UnknownVerdict, assert_cell, expect_cell, table
from chaos.expectations.cells import Cell
from chaos.history import read_history
from chaos.report.allure_cell import report_cell
from chaos.report.rows import UNKNOWN_OUTCOME, cell_row, headline

LOOK_UP = True   # `expected=LOOK_UP`: the expectation table's row for the cell's exact parameters
MAX_REASONS_SHOWN = 10      # a RigFailure lists this many of the runs' other reasons ...
MAX_REASON_CHARS = 500      # ... each cut to this length


@dataclass
class CellRun:
    """A cell's result, its histories, the expectation that judges it and its summary row."""

    cell: Cell | None            # the area module's Cell (None for a cell of the command line)
    result: CellResult
    expectation: Expectation | None
    area: str
    row: dict[str, Any]
    judged: bool = True       # False: the test asserts its own figures (expected=False)
    checked: bool = False
    _histories: list[list[dict]] | None = field(default=None, repr=False)
    cell_spec: CellSpec | None = None     # the cell as run (else the Cell's own spec)

    @property
    def spec(self) -> CellSpec:
        return self.cell_spec if self.cell_spec is not None else self.cell.spec

    @property
    def histories(self) -> list[list[dict]]:
        """Each run's history (read once, from the run dirs, which live until the test ends)."""
        if self._histories is None:
            self._histories = [read_history(Path(d), run=i) for i, d in enumerate(self.result.run_dirs)]
        return self._histories

    @property
    def run_root(self) -> Path:
        return Path(self.result.run_root)

    def fault_ops(self, run: int, name: str | None = None) -> list[dict]:
        """The values of the ``fault`` ops of one run (optionally of one fault)."""
        return [op["value"] for op in self.histories[run]
                if op["f"] == "fault" and (name is None or op.get("value", {}).get("name") == name)]

    def figures(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.result.counts.as_dict().items())

    @property
    def fault(self) -> str:
        return self.spec.fault_text

    @property
    def outcome(self) -> str:
        """`match`, `mismatch`, `rig`, `unknown` or `none` (chaos.report.rows)."""
        return self.row["outcome"]

    def vouch(self) -> None:
        """Raise RigFailure when the rig could not vouch for the runs (a server, the proxy or
        the fork server died, hung or could not be reached outside a configured fault): their
        figures say nothing about the strategy, judged or not. The message names each
        component and what happened to it, then carries its log tail."""
        failures = self.result.rig_failures
        if not failures:
            return
        detail = "\n".join(f"  {line}" for failure in failures for line in str(failure).splitlines())
        raise RigFailure(
            f"RIG FAILURE: {self.label}: {'; '.join(headline(f) for f in failures)}\n"
            f"The framework's own parts failed during the runs: verdict unknown, no strategy is to blame.\n"
            f"{detail}\n{self._other_reasons(failures)}{self._measured()}\nrun dirs: {self.run_root}")

    def _other_reasons(self, failures: list[str]) -> str:
        """The runs' reasons besides the rig failures (a fault that failed on the broken rig
        is moved among them): often what led to the failure, e.g. a fault stopped between its
        kill and its promotion."""
        others = [r for r in self.result.unknown_reasons if r not in failures]
        if not others:
            return ""
        shown = [f"  {r[:MAX_REASON_CHARS]}" for r in others[:MAX_REASONS_SHOWN]]
        if len(others) > MAX_REASONS_SHOWN:
            shown.append(f"  ... and {len(others) - MAX_REASONS_SHOWN} more (the cell's JSON has them all)")
        return "the runs' other reasons:\n" + "\n".join(shown) + "\n"

    @property
    def label(self) -> str:
        return f"{self.spec.preset_text} x {self.fault}"

    def _measured(self) -> str:
        return f"measured over {self.result.run_count} runs, verdict {self.result.verdict}: {self.figures()}"

    def check(self) -> None:
        """Assert the cell against its expectation, every measured figure and the run dirs in
        the message; a cell without a row fails with EXPECTATION MISSING (unless expected=False).

        Not every failure is the strategy's: a rig failure raises RigFailure (see `vouch`),
        an unknown verdict the row does not allow raises UnknownVerdict (the runs could not
        tell, e.g. a worker died outside a fault or the drain stalled); both are *broken* in
        Allure, apart from a mismatch (AssertionError, *failed*)."""
        self.checked = True
        self.vouch()
        if not self.judged:
            return
        if self.expectation is not None and self.outcome == UNKNOWN_OUTCOME:
            reasons = "; ".join(self.result.unknown_reasons) or "no reason recorded"
            raise UnknownVerdict(f"UNKNOWN: {self.label}: {reasons}\n{self._measured()}\nrun dirs: {self.run_root}")
        try:
            assert_cell(self.result, self.expectation, preset=self.spec.preset_text, fault=self.fault)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nrun dirs: {self.run_root}") from None


def area_of(expectation: Expectation | None, default: str) -> str:
    """The area module whose row judges the cell, else `default` (the suite's directory)."""
    if expectation is not None:
        for r in table().rows():
            if r.expectation is expectation:
                return r.area
    return default


def as_cell(cell: Cell | str, faults: str | Sequence[str] = (), runs: int = 1,
            parts: Mapping[str, str] | None = None) -> Cell:
    """A Cell from a Cell, or from a preset spec and fault spec(s) (no bounds of its own)."""
    if isinstance(cell, Cell):
        if faults or parts:
            raise TypeError("give faults and parts inside the Cell, not beside it")
        return cell
    specs = (faults,) if isinstance(faults, str) else tuple(faults)
    return Cell(cell, tuple(s for s in specs if s and s != "none"), runs, {}, parts=dict(parts or {}))


def run(cell: Cell, cluster: Any, options: Any, *, runs: int | None = None, fixed_runs: bool = False,
        time_scale: float | None = None, failpoints: Mapping[str, dict] | None = None,
        expected: Expectation | bool | None = LOOK_UP, area: str = "",
        histories: bool = False) -> CellRun:
    """Run the cell on `cluster`; every run dir is kept (chaos/pytest_plugin/rundirs.py removes a
    passing test's).

    Runs: `runs` or the cell's, overridden by ``--chaos-runs`` unless `fixed_runs`. `expected`:
    LOOK_UP (the table's row for the cell's parameters), an Expectation, or None/False (the
    test asserts its own figures). Extra `failpoints` change the cell beyond what a row's key
    says, so they need an explicit `expected`. A fault that did not heal rebuilds the cluster
    and raises.
    """
    from faults.interface import FaultError

    if failpoints and expected is LOOK_UP:
        raise ValueError(f"cell {cell.test_id} with failpoints {sorted(failpoints)}: no expectation row is keyed "
                         "by failpoints; pass expected=False (the test asserts its own figures) or "
                         "expected=Expectation.of(...)")

    default_runs = runs or cell.runs
    count = default_runs if fixed_runs else (getattr(options, "runs", None) or default_runs)
    # where it runs is the cluster's (a suite may stand on a topology of its own: suites/sentinel)
    spec = cell.spec.but(runs=count, seed=options.seed, time_scale=time_scale or options.time_scale,
                         backend=cluster.backend, topology=cluster.topology_text, server=cluster.server)
    try:
        outcome = run_judged(cluster, spec, expected=expected, area=area, cell=cell,
                             failpoints=dict(failpoints) if failpoints else None, keep_runs="always")
    except FaultError as exc:
        cluster.rebuild(reason=f"fault did not heal: {exc}")  # the next test gets a sound topology
        raise
    if histories:
        outcome.histories  # noqa: B018 - read now
    _report(outcome, spec)
    return outcome


def run_judged(cluster: Any, spec: CellSpec, *, expected: Expectation | bool | None = LOOK_UP, area: str = "",
               cell: Cell | None = None, **run: Any) -> CellRun:
    """Run `spec` (chaos.orchestrator.run_spec with `run`'s keywords) and judge it."""
    from chaos.orchestrator import run_spec
    return judge(spec, run_spec(cluster, spec, **run), expected=expected, area=area, cell=cell)


def judge(spec: CellSpec, result: CellResult, *, expected: Expectation | bool | None = LOOK_UP, area: str = "",
          cell: Cell | None = None) -> CellRun:
    """The CellRun of a finished cell: its expectation (LOOK_UP: the table's row for the spec's key;
    an Expectation; None/False: unjudged), the area of that row (else `area`), its summary row."""
    expectation = expect_cell(spec) if expected is True else expected or None
    cell_area = area_of(expectation, area)
    row = cell_row(result, spec, area=cell_area, expected=expectation, reproduce=spec.replay())
    judged = expected is not False and expected is not None
    return CellRun(cell, result, expectation, cell_area, row, judged=judged, cell_spec=spec)


def _report(outcome: CellRun, spec: CellSpec) -> None:
    """Labels, parameters, steps and attachments in Allure (a no-op when it is not reporting)."""
    report_cell(outcome.result, spec.but(runs=outcome.result.run_count), area=outcome.area,
                expected=outcome.expectation, histories=outcome._histories, reproduce=outcome.row["reproduce"])
