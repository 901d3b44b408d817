"""The scorecard in pytest: one test per fault, through the ``blackbox`` fixture.

```python
@pytest.mark.blackbox(command="python -m myapp.worker", config="tests/worker.toml")
@pytest.mark.scorecard                  # topology= and faults= optional, as the CLI's
def test_scorecard(blackbox, scorecard_fault):
    blackbox.scorecard(scorecard_fault)
```

The marker parametrizes ``scorecard_fault`` over the catalogue of chaos/scorecard/plan.py
(the test ids are the fault specs), so a nightly's Allure report has one test per fault.
``blackbox.scorecard(fault, runs=None)`` runs the cell on the test's cluster with Redis
sampled, attaches the grades, the evidence, the plot and the replay command to Allure, and
fails the test when a bound of the config's ``[expect]`` breaks (without ``[expect]``: when
any property is graded ``fail``), raises ``UnknownVerdict`` when a promised property cannot
be judged and ``RigFailure`` when the rig broke. It returns the graded
``ScoreCell`` (``.grades``, ``.cell``, ``.samples``, ``.like``, ``.reproduce``).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:   # imported when a scorecard cell runs: a pytest run that has none does not pay for them
    from chaos.scorecard.card import ScoreCell

MARKER = ("scorecard(topology=None, faults='all'): parametrize `scorecard_fault` over the scorecard's "
          "faults (one test per fault); run each with blackbox.scorecard(scorecard_fault)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def _topology(marker: Any, config: pytest.Config) -> str:
    """The marker's topology, else the session's (--chaos-topology, else $CHAOS_TOPOLOGY: ChaosOptions)."""
    from chaos.pytest_plugin.core import options_of
    from chaos.scorecard.plan import topology_name
    options = options_of(config)
    given = (marker.kwargs.get("topology") if marker else None) or getattr(options, "topology", None) or "replica"
    return topology_name(given)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scorecard_fault" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("scorecard")
    faults = (marker.kwargs.get("faults") if marker else None) or "all"
    from chaos.cellspec import split_specs
    from chaos.scorecard.plan import catalogue
    config = _marked_config(metafunc)
    cells = [c for c in catalogue(_topology(marker, metafunc.config), config) if not c.skipped] if faults == "all" else None
    specs = [c.spec for c in cells] if cells is not None else split_specs(faults)
    metafunc.parametrize("scorecard_fault", specs, ids=specs)


def _marked_config(metafunc: pytest.Metafunc) -> Any:
    """The ``blackbox`` marker's worker config, when it names one that loads (its poison cell
    runs only where it declares ``[poison]``); else None (a bad one fails the test itself)."""
    marker = metafunc.definition.get_closest_marker("blackbox")
    value = marker.kwargs.get("config") if marker else None
    if value is None:
        return None
    from chaos.blackbox.errors import ConfigError
    from chaos.blackbox.pytest_api import _config
    try:
        return _config(value, Path(str(metafunc.config.rootpath)))
    except ConfigError:
        return None


def scorecard(request: pytest.FixtureRequest, cluster: Any, command: str, config: Any, config_path: str,
              fault: str, *, runs: int, seed: int, time_scale: float, fresh: bool, cwd: Path) -> ScoreCell:
    """Run, grade and report one fault's cell (called by the ``blackbox`` fixture's ``scorecard``)."""
    from chaos.errors import RigFailure
    from chaos.expectations.table import UnknownVerdict
    from chaos.scorecard.card import run_cell
    from chaos.scorecard.grade import promised
    from chaos.scorecard.plan import plan
    marker = request.node.get_closest_marker("scorecard")
    cells = plan(fault, _topology(marker, request.config), config)     # bad input: refused before anything starts
    if len(cells) != 1:
        raise pytest.UsageError(f"blackbox.scorecard({fault!r}): give one cell's spec, e.g. one of "
                                f"{', '.join(c.spec for c in cells)}")
    with tempfile.TemporaryDirectory(prefix="chaos-scorecard-") as root:
        scored = run_cell(cluster, command, config, config_path, cells[0], runs=runs, seed=seed,
                          time_scale=time_scale, run_root=Path(root), fresh=fresh, cwd=cwd)
        _attach(scored, Path(root))
    if scored.cell is not None and scored.cell.cell.rig_failures:
        raise RigFailure("the rig failed: " + "\n".join(scored.cell.cell.rig_failures))
    grid = ", ".join(f"{k} {g.status}" for k, g in scored.grades.items())
    if config.expect:
        broken = list(scored.mismatches)
        unjudged = [p for p in promised(config.expect) if scored.grades[p].status == "unknown"]
    else:       # no [expect]: the test is the grid itself, every property that can be judged
        broken = [f"{k}: {g.evidence}" for k, g in scored.grades.items() if g.status == "fail"]
        unjudged = ["no_loss"] if scored.grades["no_loss"].status == "unknown" else []   # the run, not a property
    if broken:
        raise AssertionError(f"{scored.fault}: behaves {scored.like}\n" + "\n".join(broken)
                             + f"\n{grid}\nreplay: {scored.reproduce}")
    if unjudged:
        raise UnknownVerdict(f"{scored.fault}: {scored.grades[unjudged[0]].evidence}")
    return scored


def _attach(scored: ScoreCell, root: Path) -> None:
    """The grades, the evidence, the plot and the replay command, when Allure is reporting."""
    try:
        import allure
    except ImportError:
        return
    allure.attach(json.dumps(scored.to_json(), indent=2, default=str), name="scorecard cell.json",
                  attachment_type=allure.attachment_type.JSON)
    allure.attach(f"behaves {scored.like}\n\n" + "\n".join(f"{k}: {g.status}: {g.evidence}"
                                                           for k, g in scored.grades.items())
                  + f"\n\nreplay: {scored.reproduce}\n", name="scorecard grades.txt",
                  attachment_type=allure.attachment_type.TEXT)
    if scored.samples and scored.cell is not None and scored.cell.runs and _have_matplotlib():
        from chaos.scorecard.plots import plot_run
        for n, (samples, run) in enumerate(zip(scored.samples, scored.cell.runs)):   # every run's curves
            png = plot_run(samples, run.history, root / f"plot-run{n}.png", f"{scored.fault}, run {n}")
            if png is not None:
                allure.attach(png.read_bytes(), name=f"scorecard plot run {n}.png",
                              attachment_type=allure.attachment_type.PNG)


def _have_matplotlib() -> bool:
    """The plot needs the `plots` extra; without it the grades and evidence are attached alone."""
    import importlib.util
    return importlib.util.find_spec("matplotlib") is not None
