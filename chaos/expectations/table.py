"""The expectation mechanism: named bounds on a cell's counts, rows, and the lookup table.

Area modules (ordering.py, delivery.py, ...) each define `ROWS = [row(...), ...]`; this
module knows nothing about any preset. A mismatch text names the count, the bound and the
measured figure, and carries an upper-case tag (`[LOST: 3]`, `[MISSING_REORDERED]`) that
reports/categories.json classifies in Allure.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from chaos.cellspec import CellSpec, Spec, split_faults
from chaos.results import COUNT_NAMES, UNKNOWN, CellResult

PER_RUN_COUNTS = frozenset({"wrong_final_state_runs"})  # at most one per run: shown as x/runs
LIVENESS = "stopped_consuming"   # promised by every expectation that does not bound it (Expectation.checked)
CELL_FIELDS = frozenset(COUNT_NAMES) | {"verdict", "runs"}
NO_FAULT = "none"


class ExpectationError(ValueError):
    """An expectation row that cannot be evaluated; the message says which row and how to fix it."""


class UnknownVerdict(Exception):
    """A cell whose runs cannot vouch for themselves (a worker died, a fault did not heal, the
    drain timed out). Not an AssertionError on purpose: Allure then marks the test *broken*
    (the rig failed), not *failed* (the strategy failed). Look at the run dir's logs."""


@dataclass(frozen=True)
class RunsRef:
    """A number relative to the cell's number of runs: `RUNS`, `10 * RUNS`, `0.5 * RUNS`."""

    factor: float = 1.0

    def __mul__(self, k: float) -> RunsRef:
        return RunsRef(self.factor * k)

    __rmul__ = __mul__

    def resolve(self, runs: int) -> float:
        return self.factor * runs

    def describe(self, runs: int | None) -> str:
        symbolic = "runs" if self.factor == 1 else f"{self.factor:g} * runs"
        if runs is None:
            return symbolic
        value = f"{self.resolve(runs):g}"
        if self.factor == 1:
            return f"{value} (all runs)"
        if self.factor > 1:
            return f"{value} ({self.factor:g} per run)"
        return f"{value} ({self.factor:.0%} of runs)"


RUNS = RunsRef()
Value = int | float | str | RunsRef


def _resolve(value: Value, runs: int) -> Any:
    return value.resolve(runs) if isinstance(value, RunsRef) else value


def _describe(value: Value, runs: int | None) -> str:
    return value.describe(runs) if isinstance(value, RunsRef) else str(value)


class Bound(Protocol):
    """What an expectation holds per name: a test on the measured figure and its text."""

    relative: bool

    def holds(self, measured: Any, cell: CellResult) -> bool: ...
    def describe(self, runs: int | None) -> str: ...
    def direction(self, measured: Any, cell: CellResult) -> int: ...  # +1 too high, -1 too low, 0 n/a


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda m, v: m == v, ">=": lambda m, v: m >= v, "<=": lambda m, v: m <= v,
    ">": lambda m, v: m > v, "<": lambda m, v: m < v,
}


@dataclass(frozen=True)
class Compare:
    """`measured <op> value`, value possibly relative to runs."""

    op: str
    value: Value

    def __post_init__(self) -> None:
        if self.op not in _COMPARE:
            raise ExpectationError(f"comparison {self.op!r} is not one of {sorted(_COMPARE)}")

    @property
    def relative(self) -> bool:
        return isinstance(self.value, RunsRef)

    def holds(self, measured: Any, cell: CellResult) -> bool:
        return _COMPARE[self.op](measured, _resolve(self.value, cell.run_count))

    def describe(self, runs: int | None) -> str:
        return f"{self.op} {_describe(self.value, runs)}"

    def direction(self, measured: Any, cell: CellResult) -> int:
        target = _resolve(self.value, cell.run_count)
        if isinstance(measured, str) or isinstance(target, str):
            return 0
        return 1 if measured > target else -1


@dataclass(frozen=True)
class Between:
    """`low <= measured <= high`, either end possibly relative to runs."""

    low: Value
    high: Value

    @property
    def relative(self) -> bool:
        return isinstance(self.low, RunsRef) or isinstance(self.high, RunsRef)

    def holds(self, measured: Any, cell: CellResult) -> bool:
        runs = cell.run_count
        return _resolve(self.low, runs) <= measured <= _resolve(self.high, runs)

    def describe(self, runs: int | None) -> str:
        return f"in [{_describe(self.low, runs)}, {_describe(self.high, runs)}]"

    def direction(self, measured: Any, cell: CellResult) -> int:
        return 1 if measured > _resolve(self.high, cell.run_count) else -1


@dataclass(frozen=True)
class Satisfies:
    """Any test on the whole cell, with the description shown when it fails."""

    test: Callable[[CellResult], bool]
    description: str
    relative: bool = False
    measured: str = ""    # the figure it read, shown in a mismatch (else "see counts")

    def holds(self, measured: Any, cell: CellResult) -> bool:
        return bool(self.test(cell))

    def describe(self, runs: int | None) -> str:
        return self.description

    def direction(self, measured: Any, cell: CellResult) -> int:
        return 0


class _OneRun:
    """What Compare/Between read from a cell, for one run of it: a single run."""

    run_count = 1


@dataclass(frozen=True)
class EachRun:
    """A bound that holds in each run on its own (`each_run(ge(1))`: every run breaks), not in
    the sum over runs where one run could carry the cell. With `min_fraction` < 1, in at
    least that fraction of the runs (rounded up): a break the strategy shows in most runs,
    not all; the cell's runs then bound a false zero as suites/ordering's lock races do
    (`chaos.workload.rates.runs_for_false_zero`)."""

    inner: Compare | Between
    min_fraction: float = 1.0
    name: str = ""   # the count, set by Expectation.of
    rate: Any = None   # the measured break rate the fraction follows from (chaos.workload.rates.BreakRate)
    relative = False

    def per_run(self, cell: CellResult) -> list[Any]:
        return [getattr(r.counts, self.name) for r in cell.runs]

    def holds(self, measured: Any, cell: CellResult) -> bool:
        values = self.per_run(cell)
        meeting = sum(1 for v in values if self.inner.holds(v, _OneRun()))  # type: ignore[arg-type]
        return bool(values) and meeting >= math.ceil(self.min_fraction * len(values) - 1e-9)

    def describe(self, runs: int | None) -> str:
        where = "in each run" if self.min_fraction >= 1 else f"in >= {self.min_fraction:.0%} of runs"
        return f"{self.inner.describe(1)} {where}"

    def direction(self, measured: Any, cell: CellResult) -> int:
        return -1 if isinstance(self.inner, Compare) and self.inner.op in (">=", ">") else 0


def each_run(bound: Compare | Between, min_fraction: float = 1.0, *, rate: Any = None) -> EachRun:
    """`each_run(ge(1))`: every run shows the count (a "must break" bound per run);
    `each_run(ge(1), rate=BreakRate(k, n))`: in the fraction of runs its measured rate bounds."""
    if rate is not None:
        min_fraction = rate.min_fraction
    if not 0 < min_fraction <= 1:
        raise ExpectationError(f"each_run: min_fraction must be in (0, 1], got {min_fraction}")
    if bound.relative:
        raise ExpectationError("each_run bounds one run: give a plain number, not RUNS")
    return EachRun(bound, min_fraction, rate=rate)


def eq(value: Value) -> Compare:
    return Compare("==", value)


def ge(value: Value) -> Compare:
    return Compare(">=", value)


def le(value: Value) -> Compare:
    return Compare("<=", value)


def gt(value: Value) -> Compare:
    return Compare(">", value)


def lt(value: Value) -> Compare:
    return Compare("<", value)


def between(low: Value, high: Value) -> Between:
    return Between(low, high)


def satisfies(test: Callable[[CellResult], bool], description: str, measured: str = "") -> Satisfies:
    return Satisfies(test, description, measured=measured)


@dataclass(frozen=True)
class Mismatch:
    """One failed bound: `text` is the assertion line, `tag` the Allure category token."""

    name: str
    expected: str
    measured: str
    tag: str

    @property
    def text(self) -> str:
        return f"{self.name}: expected {self.expected}, measured {self.measured} [{self.tag}]"


def _coerce(name: str, bound: Any) -> Bound:
    if isinstance(bound, EachRun):
        if name not in COUNT_NAMES:
            raise ExpectationError(f"each_run bound on {name!r}: only counts have a figure per run")
        return replace(bound, name=name)
    if isinstance(bound, (Compare, Between, Satisfies)):
        return bound
    if isinstance(bound, (int, float, str, RunsRef)) and not isinstance(bound, bool):
        return eq(bound)
    raise ExpectationError(f"bound for {name!r} is {bound!r}; use a number, RUNS, or "
                           "eq/ge/le/gt/lt/between/each_run/satisfies from chaos.expectations.table")


@dataclass(frozen=True)
class Expectation:
    """Named bounds on a cell's counts; every bound must hold for the cell to match."""

    bounds: Mapping[str, Bound]
    note: str = ""

    def __post_init__(self) -> None:
        for name, bound in self.bounds.items():
            if name not in CELL_FIELDS and not isinstance(bound, Satisfies):
                raise ExpectationError(
                    f"expectation bound on {name!r}: no such count. Counts are "
                    f"{', '.join(sorted(CELL_FIELDS))}; a check on anything else needs satisfies()")

    @classmethod
    def of(cls, note: str = "", **bounds: Any) -> Expectation:
        """`Expectation.of(lost=0, wrong_final_state_runs=RUNS, reordered=gt(0))`."""
        if not bounds:
            raise ExpectationError("an expectation needs at least one bound, e.g. lost=0")
        return cls({name: _coerce(name, b) for name, b in bounds.items()}, note)

    @property
    def checked(self) -> Mapping[str, Bound]:
        """The bounds a cell must meet: the row's, and liveness (`stopped_consuming == 0`: a
        consumer that stops consuming after the faults healed is never expected) unless the
        row bounds `stopped_consuming` itself."""
        return self.bounds if LIVENESS in self.bounds else {**self.bounds, LIVENESS: eq(0)}

    def check(self, cell: CellResult) -> list[Mismatch]:
        """Every bound that the cell does not meet (liveness included, see `checked`)."""
        out = []
        runs = cell.run_count
        for name, bound in self.checked.items():
            measured = cell.count(name) if name in CELL_FIELDS else None
            if bound.holds(measured, cell):
                continue
            shown = _show(name, measured, runs, bound, cell)
            direction = bound.direction(measured, cell) if measured is not None else 0
            upper = name.upper()
            tag = f"MISSING_{upper}" if direction < 0 else f"{upper}: {shown}"
            out.append(Mismatch(name, bound.describe(runs), shown, tag))
        return out

    def mismatches(self, cell: CellResult) -> list[str]:
        """Texts of the failed bounds, empty when the cell matches."""
        return [m.text for m in self.check(cell)]

    def to_json(self) -> dict:
        """`expected` in `run --json`: each bound symbolically (`"== runs"`), plus the note."""
        out: dict[str, Any] = {name: bound.describe(None) for name, bound in self.bounds.items()}
        if self.note:
            out["note"] = self.note
        return out


def _show(name: str, measured: Any, runs: int, bound: Bound, cell: CellResult) -> str:
    if measured is None:
        return getattr(bound, "measured", "") or "see counts"
    if isinstance(bound, EachRun):
        return f"per run {bound.per_run(cell)}"
    if name in PER_RUN_COUNTS:
        return f"{measured}/{runs}"
    if bound.relative:
        return f"{measured} over {runs} runs"
    return str(measured)


@dataclass(frozen=True)
class Row:
    """One cell of the table; `params` are the non-default parameters it is for (none = defaults)."""

    preset: str
    fault: str
    expectation: Expectation
    params: Mapping[str, str] = field(default_factory=dict)
    area: str = ""

    def __post_init__(self) -> None:
        if ":" in self.preset or ":" in self.fault:
            raise ExpectationError(f"row {self.preset} x {self.fault}: give parameters as params=, "
                                   "not inside the name")

    @property
    def cell_key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        return self.preset, self.fault, _normal_params(self.params)

    @property
    def fault_names(self) -> list[str]:
        """The row's faults by name (`none` for none)."""
        return [f.name for f in self.spec().faults] or [NO_FAULT]

    def spec(self) -> CellSpec:
        """The CellSpec that runs this row (its own parameters; runs and seed left to the caller)."""
        return key_spec(self.preset, self.fault, self.params)


def row(preset: str, fault: str = NO_FAULT, *, note: str = "", params: Mapping[str, Any] | None = None,
        **bounds: Any) -> Row:
    """The short way to write a table row: `row("s1", "none", wrong_final_state_runs=0)`."""
    return Row(preset, fault, Expectation.of(note, **bounds), dict(params or {}))


def _normal_params(params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in params.items()))


def cell_name(preset: str, fault: str | Iterable[str] | None) -> tuple[str, str, dict[str, str]]:
    """Normalize a preset spec and one or several fault specs into (preset, fault, params): the
    key of the CellSpec they parse to (see chaos.cellspec; `expect()`'s string edge).

    Several faults are joined with `+` in the given order; their parameters are merged
    (fault parameters keyed `<fault>.<k>`, so they cannot collide with the preset's).
    """
    given = [NO_FAULT] if fault is None else [fault] if isinstance(fault, str) else list(fault) or [NO_FAULT]
    return CellSpec.parse(preset, given).key


def key_spec(preset: str, fault: str | None, params: Mapping[str, Any] | None) -> CellSpec:
    """A row key (a Row's, or a summary row's `preset`, `fault`, `params`) back to the CellSpec
    that runs it: the inverse of CellSpec.key, and the one place a key's `a+b` fault names and
    `<fault>.<k>` parameters are taken apart. Parameters named by a part's slot are replaced parts."""
    from chaos.strategies.presets import SLOTS
    names = split_faults(str(fault or NO_FAULT))
    own: dict[str, str] = {}
    per_fault: dict[str, dict[str, str]] = {name: {} for name in names}
    parts: dict[str, str] = {}
    for key, value in (params or {}).items():
        owner, dot, param = str(key).partition(".")
        if dot and owner in per_fault:
            per_fault[owner][param] = str(value)
        elif key in SLOTS:
            parts[str(key)] = str(value)
        else:
            own[str(key)] = str(value)
    return CellSpec(Spec.of(str(preset), own), tuple(Spec.of(n, p) for n, p in per_fault.items()),
                    tuple((slot, Spec.parse(text, f"part {slot}")) for slot, text in parts.items()))


class ExpectationTable:
    """All rows, looked up by cell; duplicate cells are an error naming both areas."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self._rows: dict[tuple, Row] = {}
        for r in rows:
            other = self._rows.get(r.cell_key)
            if other is not None:
                raise ExpectationError(f"cell {r.preset} x {r.fault} {dict(r.params)} is defined twice "
                                       f"(areas {other.area or '?'} and {r.area or '?'}); keep one")
            self._rows[r.cell_key] = r

    def __len__(self) -> int:
        return len(self._rows)

    def rows(self) -> list[Row]:
        return list(self._rows.values())

    def lookup(self, preset: str, fault: str | Iterable[str] | None = NO_FAULT,
               params: Mapping[str, Any] | None = None) -> Expectation | None:
        """The expectation for a cell run with exactly these non-default params, else None."""
        name, fault_name, spec_params = cell_name(preset, fault)
        spec_params.update({str(k): str(v) for k, v in (params or {}).items()})
        found = self._rows.get((name, fault_name, _normal_params(spec_params)))
        return found.expectation if found else None

    def row_for(self, key: tuple[str, str, Mapping[str, Any]]) -> Row | None:
        """The row of a parsed cell key (chaos.cellspec.CellSpec.key), else None."""
        preset, fault, params = key
        return self._rows.get((preset, fault, _normal_params(params)))


def assert_cell(cell: CellResult, expectation: Expectation | None, *, preset: str = "?",
                fault: str = "?") -> None:
    """Raise AssertionError listing every mismatch and all measured figures; UnknownVerdict
    when the runs cannot vouch for themselves (unless the expectation bounds the verdict)."""
    label = f"{preset} x {fault}"
    figures = _figures(cell)
    if expectation is None:
        raise AssertionError(f"EXPECTATION MISSING for {label}: add a row to the area module in "
                             f"chaos/expectations/ (or pass the expectation explicitly)\n{figures}")
    if cell.verdict == UNKNOWN and "verdict" not in expectation.bounds:
        reasons = "; ".join(cell.unknown_reasons) or "no reason recorded"
        raise UnknownVerdict(f"UNKNOWN: {label}: {reasons}\n{figures}")
    found = expectation.check(cell)
    if found:
        lines = "\n".join(f"  {m.text}" for m in found)
        raise AssertionError(f"EXPECTATION MISMATCH {label} ({len(found)} of {len(expectation.checked)}"
                             f" bounds failed):\n{lines}\n{figures}")


def _figures(cell: CellResult) -> str:
    counts = " ".join(f"{k}={v}" for k, v in cell.counts.as_dict().items())
    anomalies = "; ".join(
        f"{a.kind} key={a.key} run={a.run} versions={a.versions} examples={a.examples}"
        for a in cell.anomalies[:5])
    return (f"measured over {cell.run_count} runs, verdict {cell.verdict}: {counts}"
            + (f"\nanomalies: {anomalies}" if anomalies else ""))
