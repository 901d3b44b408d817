"""The pytest plugin: one entry point (``pytest11``: ``chaos.pytest_plugin``), one module per concern.

* ``core``: the session's options (``--chaos-runs``, ``--chaos-seed``, ...), the ``slow``
  marker, and the ``chaos_*`` topology and client fixtures.
* ``exported``: ``--chaos-server``, ``--chaos-topology``, ``--chaos-load-size``, exported
  to the environment before xdist starts its workers.
* ``cells``: the ``chaos_cell`` fixture and the per-cell summary (``--chaos-summary``).
* ``blackbox``: the ``blackbox`` fixture and marker (your own consumer under faults);
  chaos/scorecard/pytest_api.py: the ``scorecard`` marker.
* ``allure_results``: what the Allure results dir needs besides the test results.
* ``rundirs``: a passing test's run dirs removed, a failing one's named.
* ``shard``: ``--chaos-shard K/N`` (nightly CI).
* ``hookspecs``: hooks a project's conftest may implement (``pytest_chaos_cell_finished``).
* ``settings``: every ``--chaos-*`` option with its ini twin.

A pytest run that uses none of it is left as it was: no header line, nothing written into
its Allure results, no labels on its tests, and the heavy imports (clients, cluster,
orchestrator) happen only when a chaos fixture runs. ``aliases`` (the fixtures' short
names) is not loaded here.
"""
from __future__ import annotations

import pytest

pytest_plugins = ["chaos.pytest_plugin.core",
                  "chaos.pytest_plugin.exported",        # --chaos-server, --chaos-topology, --chaos-load-size
                  "chaos.pytest_plugin.allure_results",  # environment.properties, categories, --alluredir checks
                  "chaos.pytest_plugin.shard",           # --chaos-shard K/N and recorded durations (nightly CI)
                  "chaos.pytest_plugin.rundirs",         # a passing test's run dirs removed, a failing one's named
                  "chaos.pytest_plugin.cells",           # the cell runner (chaos_cell), the per-cell summary
                  "chaos.pytest_plugin.blackbox",        # the blackbox fixture and marker
                  "chaos.scorecard.pytest_api"]          # @pytest.mark.scorecard, blackbox.scorecard(fault)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from chaos.pytest_plugin import hookspecs
    pluginmanager.add_hookspecs(hookspecs)
