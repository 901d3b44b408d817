"""Root conftest: makes the chaos plugin active for runs from a checkout, gives this
repository's tests the fixtures' short names (``cluster``, ``postgres``, ...: aliases of the
``chaos_*`` fixtures), and orders the tests for xdist so that a session does not end with
one worker running a long test alone.

When the package is pip-installed the `pytest11` entry point (named
``chaos.pytest_plugin``) registers the plugin already and its line below is a no-op.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

pytest_plugins = ["chaos.pytest_plugin", "chaos.pytest_plugin.aliases"]

CELL_FIXTURES = frozenset({"chaos_cell", "blackbox"})   # a test that runs cells: seconds to minutes
CELL_SECONDS = 30.0
SLOW_SECONDS = 60.0
# Modules whose tests run pytest sessions, clusters or the CLI in child processes: 10-60 s a
# test (pytest --durations of whole runs). Only an order hint: a stale entry costs nothing.
CHILD_SESSION_MODULES = {
    "tests/nightly/test_kept_runs.py": 40.0, "tests/nightly/test_merge.py": 40.0,
    "tests/nightly/test_shard.py": 20.0, "tests/report/test_allure_cell.py": 20.0,
    "tests/report/test_report_in_browser.py": 45.0, "tests/report/test_pytest_allure.py": 20.0,
    "tests/workload/test_load_producer.py": 20.0, "tests/cells/test_cell_summary.py": 20.0,
    "tests/cells/test_readme_cell_tests.py": 45.0, "tests/cluster/test_cluster_isolation.py": 35.0,
    "tests/cluster/test_cluster_plugin.py": 10.0, "tests/cluster/test_cluster_cleanup.py": 20.0,
    "tests/cluster/test_cluster_cli.py": 10.0, "tests/docs/test_doc_commands.py": 10.0,
    "tests/docs/test_readme.py": 10.0, "tests/outbox/test_relay_load.py": 10.0,
    "tests/outbox/test_dispatcher.py": 5.0, "tests/proxy/test_proxy_robustness.py": 5.0,
}

# Single tests far longer than their module's or kind's figure (node id prefixes; pytest
# --durations of whole runs at -n 4, load 13-20, and 8-9 for the two failover rows): the two
# kill-consumer cells that work off 2000 jobs of 5 ms after the kill, the WAIT comparison
# (two failover cells), the failover rows whose measured reorder rates need the most runs
# (72 and 62 s), the shard test that collects the whole suite twice.
LONG_TESTS = {
    "suites/failover/test_failover.py::test_failover_cell[p2-entry-id]": 70.0,
    "suites/failover/test_failover.py::test_failover_cell[inbox]": 60.0,
    "suites/delivery/test_kill_consumer.py::test_kill_consumer_cell[ack-after:respawn=1": 50.0,
    "suites/failover/test_failover.py::test_wait_confirmed_producer_loses_far_less": 50.0,
    "tests/nightly/test_shard.py::test_shards_of_the_real_collection_are_disjoint_and_cover_it": 50.0,
}


def expected_seconds(item: pytest.Item) -> float:
    """A rough cost, only to order the tests: ``@pytest.mark.slow(seconds=N)``, else 60 for
    ``slow``, a LONG_TESTS figure, 30 for a test that runs cells, the module's figure above,
    else 0 (most tests take well under a second)."""
    slow = item.get_closest_marker("slow")
    if slow is not None:
        return float(slow.kwargs.get("seconds", SLOW_SECONDS))
    for prefix, seconds in LONG_TESTS.items():
        if item.nodeid.startswith(prefix):
            return seconds
    if CELL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return CELL_SECONDS
    return CHILD_SESSION_MODULES.get(item.nodeid.split("::", 1)[0], 0.0)


def dispatch_order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """Longest first (stable: equal costs keep the collection order). xdist (``--dist load``,
    ``--maxschedchunk 1``) hands each worker the first two tests it has not handed out, then one
    test whenever a worker finishes one, and a worker's second test waits for its first: so
    the ``workers`` longest tests each get a short one, not a long one, queued behind them."""
    ranked = sorted(items, key=expected_seconds, reverse=True)
    if workers < 2 or len(ranked) < 2 * workers or expected_seconds(ranked[-workers]) > 0:
        return ranked
    heads, tails, middle = ranked[:workers], ranked[-workers:], ranked[workers:-workers]
    paired = [item for pair in zip(heads, tails) for item in pair]
    return paired + middle


@pytest.fixture(scope="session")
def shared_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], Any]], Any]:
    """``shared_once(name, build)``: ``build(folder)``'s JSON-able result, made once per session
    even under xdist. A module- or session-scoped fixture runs once per xdist worker that gets
    one of its tests; an expensive one (a nested pytest session, a generated report) through
    this runs once: the first worker to ask builds it under a lock, in the base temp dir all
    workers of the session share, and the others read its result (and its files). A build that
    fails leaves no result, so the next worker to ask tries again and fails on its own."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                      # the controller's base temp, shared by its workers

    def once(name: str, build: Callable[[Path], Any]) -> Any:
        folder = base / f"shared-{name}"
        folder.mkdir(exist_ok=True)
        with open(folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = folder / "result.json"
            if done.exists():
                return json.loads(done.read_text())
            work = folder / "work"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            result = build(work)
            done.write_text(json.dumps(result))
            return result
    return once


def plugins_kept_out(args: list[str]) -> list[str]:
    """The ``-p no:NAME`` options among ``args`` (as pairs: ``["-p no:x", ...]``)."""
    return [f"-p {name}" for flag, name in zip(args, args[1:]) if flag == "-p" and name.startswith("no:")]


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist each worker takes the next test when it finishes one (``--maxschedchunk 1``,
    unless given), in the order below, instead of a batch handed out early: a batch can end the
    session with one worker running the long tests it was given while the others are idle.

    The nested pytest sessions the tests start (tests/report, tests/nightly, tests/cells, ...)
    mostly run in temp dirs, outside this repository's ini: they get its ``-p no:...``
    options through ``PYTEST_ADDOPTS``, else each pays ~1.3 s of CPU importing hypothesis,
    pytest-benchmark and anyio (pyproject.toml's addopts)."""
    if config.pluginmanager.hasplugin("xdist") and getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1
    current = os.environ.get("PYTEST_ADDOPTS", "")
    missing = [pair for pair in plugins_kept_out(config.getini("addopts")) if pair not in current]
    if missing:
        os.environ["PYTEST_ADDOPTS"] = " ".join([current, *missing]).strip()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers only (they collect what the controller hands out; every worker orders
    the same items the same way): a run without xdist keeps pytest's collection order."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is None:
        return
    items[:] = dispatch_order(items, int(worker_input.get("workercount", 1)))
