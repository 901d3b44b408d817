"""Run dirs per test: a passing test's are removed, a failing test's are kept and named.

Every run dir a test writes on its worker's cluster lands in ``<base>/.kept/<cluster>/``
(chaos/cluster/rundirs.py). This plugin notes what is there before each test that uses the
cluster; afterwards it removes what the test added if the test passed (unless
``--chaos-keep-runs``), and a failing test's report gets a "chaos run dirs" section with the
paths, which stay valid after the session. What is kept is bounded by rundirs.retain
(CHAOS_KEPT_DIRS / CHAOS_KEPT_MB / CHAOS_KEPT_DAYS), applied at every cluster start and close.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from chaos.pytest_plugin import settings
from chaos.pytest_plugin.core import cluster_name

_BEFORE = pytest.StashKey[frozenset[str]]()
_FAILED = pytest.StashKey[bool]()
_WATCHED = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    if not any(k.startswith("CHAOS_KEPT_") for k in os.environ):
        return   # the defaults are valid: nothing to check, nothing to import
    from chaos.cluster.rundirs import Retention
    try:
        Retention.from_env()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _watched(item: pytest.Item) -> Path | None:
    """The runs dir of this worker's session cluster, if the test uses it. A suite with a
    topology of its own names its cluster ``<this name>-<topology>`` (suites/sentinel): its
    runs dir sits beside this one and is watched with it (see `_dirs`)."""
    if "chaos_cluster" not in getattr(item, "fixturenames", ()):
        return None
    config = item.config
    path = config.stash.get(_WATCHED, None)
    if path is None:
        from chaos.cluster.rundirs import kept_root
        path = config.stash[_WATCHED] = kept_root() / cluster_name(config)
    return path


def _dirs(path: Path) -> list[Path]:
    """`path` and its ``<name>-*`` siblings that exist."""
    try:
        return [d for d in path.parent.iterdir()
                if d.name == path.name or d.name.startswith(path.name + "-")]
    except OSError:
        return []


def _entries(path: Path | None) -> frozenset[str]:
    """What the watched runs dirs hold, as ``<runs dir>/<entry>`` (owner records left out)."""
    if path is None:
        return frozenset()
    from chaos.cluster.rundirs import OWNER_FILE
    found = set()
    for runs in _dirs(path):
        try:
            found.update(f"{runs.name}/{p.name}" for p in runs.iterdir() if not p.name.startswith(OWNER_FILE))
        except OSError:
            continue
    return frozenset(found)


def _added(item: pytest.Item) -> list[Path]:
    path = _watched(item)
    if path is None:
        return []
    return [path.parent / name for name in sorted(_entries(path) - item.stash.get(_BEFORE, frozenset()))]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    item.stash[_BEFORE] = _entries(_watched(item))
    item.stash[_FAILED] = False
    result = yield
    watched = _watched(item)
    if watched is not None and not item.stash[_FAILED] and not settings.value(item.config, "chaos_keep_runs"):
        from chaos.cluster.rundirs import OWNER_FILE
        for path in _added(item):
            shutil.rmtree(path, ignore_errors=True)
        for runs in _dirs(watched):
            if not (runs / OWNER_FILE).exists():
                try:
                    runs.rmdir()     # the cluster closed during this test's teardown: nothing is kept
                except OSError:
                    pass             # not empty (an earlier test's failure) or not there
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
        kept = _added(item)
        if kept:
            report.sections.append(("chaos run dirs (kept)", "\n".join(map(str, kept))))
    return report
