"""The pytest API for testing your own consumer black-box.

```python
@pytest.mark.blackbox(command="python -m myapp.worker", config="tests/worker.toml")
def test_no_duplicate_emails_when_a_worker_dies(blackbox):
    cell = blackbox(fault="kill-consumer:at_ms=800", expect={"duplicated_side_effects": 0, "lost": 0})
    assert cell.count("wrong_final_state_runs") == 0
```

``blackbox(command=None, config=None, *, fault=None, runs=None, seed=None, time_scale=None,
expect=None)`` runs the consumer on the test's freshly reset ``cluster`` and returns a
``BlackBoxCell`` (``.count(name)``, ``.cell`` the checker's CellResult, ``.extra`` the
black-box figures, ``.runs``). The marker gives defaults for command and config;
``config`` is a path to the TOML file or the same structure as a dict. ``expect``
(merged over the config's ``[expect]``) raises AssertionError naming each broken bound,
``UnknownVerdict`` when the runs cannot vouch for themselves, and ``RigFailure`` (chaos.errors)
when a server or proxy of the topology died or hung: the rig's failure, not the consumer's. Runs, seed and time
scale come from ``--chaos-seed`` and ``--chaos-time-scale``; ``--chaos-runs`` overrides the
test's ``runs`` (default 1); the workers run
in the pytest root directory.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos.blackbox import expect as expectations
from chaos.blackbox.config import WorkerConfig, load_config, parse_config
from chaos.blackbox.session import BlackBoxCell, run_blackbox
from chaos.errors import RigFailure
from chaos.expectations.table import UnknownVerdict

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


def blackbox_runner(request: pytest.FixtureRequest, cluster: Any, chaos_options: Any) -> Callable[..., BlackBoxCell]:
    """Run your consumer under faults on this test's cluster and check it (see module doc)."""
    marker = request.node.get_closest_marker("blackbox")
    defaults = dict(marker.kwargs) if marker else {}
    root = Path(str(request.config.rootpath))
    first = [True]

    def run(command: str | list[str] | None = None, config: Any = None, *, fault: str | list[str] | None = None,
            runs: int | None = None, seed: int | None = None, time_scale: float | None = None,
            expect: dict[str, Any] | None = None) -> BlackBoxCell:
        command = command or defaults.get("command")
        config = config or defaults.get("config")
        if not command or config is None:
            raise pytest.UsageError("blackbox(): give command= and config= (or @pytest.mark.blackbox(command=..., "
                                    "config=...))")
        cfg = _config(config, root)
        bounds = {**cfg.expect, **{k: expectations.parse_bound(k, v) for k, v in (expect or {}).items()}}
        faults = [fault] if isinstance(fault, str) else list(fault or [])
        runs = getattr(chaos_options, "runs", None) or runs or 1  # --chaos-runs overrides a test's default
        cell = run_blackbox(cluster, command, cfg, faults=faults, runs=runs,
                            seed=_option(chaos_options, "seed", 0) if seed is None else seed,
                            time_scale=time_scale or _option(chaos_options, "time_scale", 1.0),
                            reset=not first[0], cwd=root)
        first[0] = False
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
