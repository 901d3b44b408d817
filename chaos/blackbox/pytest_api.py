"""The pytest API for testing your own consumer black-box.

```python
@pytest.mark.blackbox(command="python -m myapp.worker", config="tests/worker.toml")
def test_no_duplicate_emails_when_a_worker_dies(blackbox):
    cell = blackbox(fault="kill-consumer:at_ms=800", expect={"duplicated_side_effects": 0, "lost": 0})
    assert cell.count("wrong_final_state_runs") == 0
```

``blackbox(command=None, config=None, *, fault=None, runs=None, seed=None, time_scale=None,
expect=None)`` runs the consumer on the test's freshly reset ``cluster`` and returns a
``BlackBoxRuns`` (``.count(name)``, ``.cell`` the CellResult (chaos.results), ``.extra`` the
black-box figures, ``.runs``). The marker gives defaults for command and config;
``config`` is a path to the TOML file or the same structure as a dict. ``expect``
(merged over the config's ``[expect]``) raises AssertionError naming each broken bound,
``UnknownVerdict`` when the runs cannot vouch for themselves, and ``RigFailure`` (chaos.errors)
when a server or proxy of the topology died or hung: the rig's failure, not the consumer's. Runs, seed and time
scale come from ``--chaos-seed`` and ``--chaos-time-scale``; ``--chaos-runs`` overrides the
test's ``runs`` (default 1); the workers run
in the pytest root directory. Liveness is always promised (``stopped_consuming == 0``, see
chaos/blackbox/expect.py) unless ``expect`` bounds it.

Each cell is reported like a built-in one: a row in the terminal summary and
``--chaos-summary`` (preset = the worker command), and in Allure its labels, runs,
``cell.json`` and histories, with the ``python -m chaos run --worker-cmd ...`` command that
replays it (none when ``config`` is a dict: only a file can be named on a command line).
"""
from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos.blackbox import expect as expectations
from chaos.blackbox.config import WorkerConfig, load_config, parse_config
from chaos.blackbox.session import BlackBoxRuns, parse_faults, run_blackbox
from chaos.cellspec import CellSpec, Spec
from chaos.errors import RigFailure
from chaos.expectations.table import UnknownVerdict
from chaos.replay import blackbox_command

def _config(value: str | Path | dict | WorkerConfig, root: Path) -> WorkerConfig:
    if isinstance(value, WorkerConfig):
        return value
    if isinstance(value, dict):
        return parse_config(value)
    path = Path(value)
    return load_config(path if path.is_absolute() else root / path)


def _option(chaos_options: Any, name: str, default: Any) -> Any:
    value = getattr(chaos_options, name, None)
    return default if value is None else value


def blackbox_runner(request: pytest.FixtureRequest, cluster: Any, chaos_options: Any, *, area: str = "",
                    row_property: str | None = None) -> Callable[..., BlackBoxRuns]:
    """Run your consumer under faults on this test's cluster and check it (see module doc).
    `area` and `row_property`: the summary row's area and the user-property name the plugin's
    summary collects rows under (chaos/pytest_plugin/cells.py); without one no row is recorded."""
    marker = request.node.get_closest_marker("blackbox")
    defaults = dict(marker.kwargs) if marker else {}
    root = Path(str(request.config.rootpath))
    first = [True]

    def run(command: str | list[str] | None = None, config: Any = None, *, fault: str | list[str] | None = None,
            runs: int | None = None, seed: int | None = None, time_scale: float | None = None,
            expect: dict[str, Any] | None = None) -> BlackBoxRuns:
        command = command or defaults.get("command")
        config = config or defaults.get("config")
        if not command or config is None:
            raise pytest.UsageError("blackbox(): give command= and config= (or @pytest.mark.blackbox(command=..., "
                                    "config=...))")
        cfg = _config(config, root)
        bounds = {**cfg.expect, **{k: expectations.parse_bound(k, v) for k, v in (expect or {}).items()}}
        faults = parse_faults([fault] if isinstance(fault, str) else list(fault or []))   # the edge
        runs = getattr(chaos_options, "runs", None) or runs or 1  # --chaos-runs overrides a test's default
        seed = _option(chaos_options, "seed", 0) if seed is None else seed
        time_scale = time_scale or _option(chaos_options, "time_scale", 1.0)
        t0 = time.monotonic()
        cell = run_blackbox(cluster, command, cfg, faults=faults, runs=runs, seed=seed, time_scale=time_scale,
                            reset=not first[0], cwd=root)
        first[0] = False
        again = None
        if isinstance(config, (str, Path)):
            again = blackbox_command(_text(command), str(config), cell.fault_texts, runs, seed, time_scale,
                                     cluster.backend, topology=cluster.topology_text, server=cluster.server)
        row = report(cell, area=area, command=_text(command), bounds=bounds, seed=seed, time_scale=time_scale,
                     wall_s=time.monotonic() - t0, reproduce=again, cluster=cluster)
        if row_property:
            request.node.user_properties.append((row_property, row))
        if cell.cell.rig_failures:     # the rig broke, not the consumer: Allure shows the test broken
            raise RigFailure("the rig failed: " + "\n".join(cell.cell.rig_failures))
        if cell.cell.verdict == "unknown":
            raise UnknownVerdict("; ".join(cell.cell.unknown_reasons))
        mismatches = expectations.check(bounds, cell.cell, cell.extra)
        if mismatches:
            raise AssertionError("\n".join(mismatches))
        return cell

    def scorecard(fault: str, *, command: str | list[str] | None = None, config: Any = None,
                  runs: int | None = None) -> Any:
        """One scorecard cell (chaos/scorecard/pytest_api.py, found as a plugin: no import cycle)."""
        plugin = request.config.pluginmanager.get_plugin("chaos.scorecard.pytest_api")
        command = command or defaults.get("command")
        config = config or defaults.get("config")
        if plugin is None or not command or config is None:
            raise pytest.UsageError("blackbox.scorecard(): needs the chaos plugin and command= and config= "
                                    "(or @pytest.mark.blackbox(command=..., config=...))")
        cfg = _config(config, root)
        cell = plugin.scorecard(request, cluster, command, cfg, str(config), fault,
                                runs=getattr(chaos_options, "runs", None) or runs or 1,
                                seed=_option(chaos_options, "seed", 0),
                                time_scale=_option(chaos_options, "time_scale", 1.0), fresh=first[0], cwd=root)
        first[0] = False
        return cell

    run.scorecard = scorecard
    return run


def _text(command: str | list[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def report(cell: BlackBoxRuns, *, area: str, command: str, bounds: dict, seed: int, time_scale: float,
           wall_s: float, reproduce: str | None, cluster: Any = None) -> dict:
    """The cell's Allure report and summary row (terminal table, --chaos-summary), like a
    built-in cell's (chaos/report/allure_cell.py, chaos/report/rows.py); returns the row."""
    from chaos.report.allure_cell import report_cell
    from chaos.report.rows import cell_row

    result = cell.cell
    result.wall_s = wall_s
    expected = expectations.expectation(bounds, cell.extra)
    # the consumer's own command names the cell (a name, not a preset spec: never parsed)
    spec = CellSpec(Spec(command), tuple(cell.faults),
                    runs=result.run_count, seed=seed, time_scale=time_scale,
                    backend=getattr(cluster, "backend", None), topology=getattr(cluster, "topology_text", None),
                    server=getattr(cluster, "server", None))
    row = cell_row(result, spec, area=area, expected=expected, reproduce=reproduce)
    extra = {**cell.extra.as_dict(), "stalled_after_heal_s": cell.stalled_after_heal_s,
             "undelivered": result.counts.undelivered}
    row["blackbox"] = {"worker_cmd": command, **extra}
    report_cell(result, spec, area=row["area"], expected=expected,
                histories=[r.history for r in cell.runs], reproduce=reproduce,
                extra_json={**extra, "blackbox": {"worker_cmd": command}})
    return row
