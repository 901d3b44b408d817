"""Allure for a chaos pytest session: what the results dir needs besides the test results.

Listed in chaos/pytest_plugin/__init__.py's ``pytest_plugins``; does nothing without
``--alluredir``, and nothing to the results of a session whose tests used no chaos topology
(a project that has the package installed but does not use it sees no change).

* Before anything starts: an ``--alluredir`` that cannot be written is a usage error naming
  the fix (allure-pytest itself would fail later with a traceback).
* While the session runs: the first time a worker's topology comes up, what it runs is
  noted (Redis/Valkey server and version, PostgreSQL version, proxy implementation);
  pytest-xdist workers hand that to the controller in ``workeroutput``.
* At session end, on the controller only, when a topology ran: ``environment.properties``
  (those, plus backend, time scale, base seed and git revision) is written, the chaos
  categories are merged into ``categories.json`` (Allure 2; a project's own categories are
  kept after them; Allure 3 takes the same rules from allurerc.json), and files in the
  results dir that are not this session's results are explained.
* Tests that reported no cell get epic/feature labels (their directory and module) only with
  ``--chaos-allure-tree`` (ini ``chaos_allure_tree``), which this repository sets.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import json

import pytest

from chaos.pytest_plugin import settings
from chaos.pytest_plugin.core import options_of

ENV_FILE = "environment.properties"
CATEGORIES_FILE = "categories.json"
_WORKER_KEY = "chaos_allure_environment"
_CLUSTER_ENV = pytest.StashKey[dict]()
_STARTED = pytest.StashKey[float]()
# What allure-pytest and Allure itself put into a results dir (anything else is foreign).
ALLURE_SUFFIXES = ("-result.json", "-container.json")
ALLURE_NAMES = {ENV_FILE, CATEGORIES_FILE, "environment.xml", "executor.json", "history", "allurerc.json"}


def results_dir(config: pytest.Config) -> Path | None:
    """The ``--alluredir`` of the session, or None when Allure is not reporting."""
    value = getattr(config.option, "allure_report_dir", None)
    return Path(value).absolute() if value else None


def _on_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-allure-tree", flag_only=True,
                 help="with --alluredir: file tests that reported no cell under their directory and module "
                      "(epic/feature labels), beside the cells' area > preset > fault")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Refuse an unwritable results dir before allure-pytest (or any server) starts."""
    config.stash[_STARTED] = time.time()
    directory = results_dir(config)
    if directory is None or not _on_controller(config):
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".chaos-write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(
            f"--alluredir {directory}: cannot write there ({exc.strerror or exc}); give a directory you can "
            f"write, e.g. --alluredir reports/allure-results, or fix its permissions") from None


# ---------------------------------------------------------------------------------------------
# the report's tree: area > preset > fault for cells (report_cell), test dir > module otherwise
# ---------------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        return (yield)
    finally:
        if results_dir(item.config) is not None and settings.value(item.config, "chaos_allure_tree"):
            tree_labels(item)


def tree_labels(item: pytest.Item) -> None:
    """A test that reported no cell gets epic = its directory (two levels, `tests/checker`) and
    feature = its module, so it sits in the tree beside the areas instead of at its root."""
    from chaos.report.allure_cell import _reporter
    reporter = _reporter()
    test = reporter.get_test(None) if reporter is not None else None
    if test is None or any(label.name == "epic" for label in test.labels):
        return
    import allure
    path = Path(item.nodeid.split("::")[0])
    allure.dynamic.epic("/".join(path.parent.parts[:2]) or Path(str(item.config.rootpath)).name)
    allure.dynamic.feature(path.name)


# ---------------------------------------------------------------------------------------------
# what the topology runs (recorded where the cluster lives: in the worker)
# ---------------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Any:
    result = yield
    config = request.config
    if fixturedef.argname == "chaos_cluster" and results_dir(config) and _CLUSTER_ENV not in config.stash:
        config.stash[_CLUSTER_ENV] = cluster_environment(result)
    return result


def cluster_environment(cluster: Any) -> dict[str, str]:
    """Server and version, PostgreSQL version and proxy implementation, each asked of the
    running topology; a failed question gives its reason as the value, never an error."""
    env: dict[str, str] = {}
    try:
        from chaos.cluster.servers import server_info
        info = server_info(cluster)
        env["redis.server"] = str(info.get("server", "?"))
        env["redis.version"] = str(info.get("version", "?"))
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the tests still run
        env["redis.server"] = f"unknown ({type(exc).__name__}: {exc})"
    try:
        with cluster.pg_connect() as conn:
            env["postgresql.version"] = str(conn.execute("SHOW server_version").fetchone()[0])
    except Exception as exc:  # noqa: BLE001
        env["postgresql.version"] = f"unknown ({type(exc).__name__}: {exc})"
    try:
        from chaos.cluster.proxy_server import proxy_choice
        kind, which = proxy_choice()
        env["proxy"] = f"{which if kind == 'spawn' else 'shared ' + which} (API version {cluster.api.version()})"
    except Exception as exc:  # noqa: BLE001
        env["proxy"] = f"unknown ({type(exc).__name__}: {exc})"
    return env


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if results_dir(config) is None:
        return
    if not _on_controller(config):
        if _CLUSTER_ENV in config.stash:
            config.workeroutput[_WORKER_KEY] = config.stash[_CLUSTER_ENV]
        return
    if _CLUSTER_ENV in config.stash:     # a chaos topology ran: else the results are not ours to touch
        write_results_extras(config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: keep the first worker's topology facts (they are the same on all)."""
    env = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if env and _CLUSTER_ENV not in node.config.stash:
        node.config.stash[_CLUSTER_ENV] = env


# ---------------------------------------------------------------------------------------------
# the results dir at session end
# ---------------------------------------------------------------------------------------------
def session_environment(config: pytest.Config) -> dict[str, str]:
    """Every line of environment.properties, topology facts included when a cluster ran."""
    env = dict(config.stash.get(_CLUSTER_ENV, {}) or {})
    options = options_of(config)
    env["backend"] = str(getattr(options, "backend", None) or "native")
    env["topology"] = str(getattr(options, "topology", None) or "replica")   # --chaos-topology, else $CHAOS_TOPOLOGY
    env["time_scale"] = f"{getattr(options, 'time_scale', None) or 1.0:g}"
    env["seed"] = str(getattr(options, "seed", None))
    runs = getattr(options, "runs", None)
    env["runs"] = str(runs) if runs else "suite default"
    env["git.revision"] = git_revision(Path(str(config.rootpath)))
    if env["git.revision"].startswith("unknown"):  # tests outside a checkout: the framework's own
        env["git.revision"] = git_revision(Path(__file__).resolve().parent)
    return env


def git_revision(root: Path) -> str:
    """`abc1234` or `abc1234-dirty`; `unknown` outside a git checkout."""
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{rev}-dirty" if dirty else rev


def properties_text(env: dict[str, str]) -> str:
    """Java .properties: one `key=value` line each; `\\`, newlines and separators escaped."""
    def escape(text: str, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        if key:
            for ch in "=: ":
                text = text.replace(ch, "\\" + ch)
        return text
    return "".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in env.items())


def foreign_files(directory: Path, since: float) -> tuple[list[str], int]:
    """(names that are not Allure results, results older than this session)."""
    foreign, older = [], 0
    for path in sorted(directory.iterdir()):
        name = path.name
        if name in ALLURE_NAMES or name.startswith(".chaos-write-probe"):
            continue
        if name.endswith(ALLURE_SUFFIXES):
            older += path.stat().st_mtime < since
        elif "-attachment" not in name:
            foreign.append(name)
    return foreign, older


def write_results_extras(config: pytest.Config) -> None:
    directory = results_dir(config)
    assert directory is not None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = (lambda text: reporter.write_line(text)) if reporter else (lambda text: None)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / ENV_FILE).write_text(properties_text(session_environment(config)), encoding="utf-8")
        _write_categories(directory)
    except OSError as exc:
        say(f"allure: could not write {ENV_FILE}/{CATEGORIES_FILE} into {directory} ({exc}); "
            "the test results are there, the report lacks the environment and the categories")
        return
    foreign, older = foreign_files(directory, config.stash.get(_STARTED, time.time()))
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        say(f"allure: {len(foreign)} file(s) in {directory} are not Allure results ({shown}); Allure ignores "
            "them. Keep other files elsewhere, or start from an empty dir with --clean-alluredir")
    if older:
        say(f"allure: {older} result(s) in {directory} are from an earlier session and will be mixed into "
            "the report; add --clean-alluredir to report this session alone")


def _write_categories(directory: Path) -> None:
    """The chaos categories for Allure 2 (Allure 3 reads the same rules from allurerc.json),
    merged into the file a project may already keep there: ours first (they match only the
    framework's failure tags, and Allure takes the first match), then its own, minus any of
    the same name. A file that is not a JSON list is replaced."""
    from chaos.report.categories import CATEGORIES
    path = directory / CATEGORIES_FILE
    theirs: list = []
    if path.exists():
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
            theirs = found if isinstance(found, list) else []
        except (OSError, ValueError):
            theirs = []
    ours = {c.get("name") for c in CATEGORIES}
    kept = [c for c in theirs if not (isinstance(c, dict) and c.get("name") in ours)]
    path.write_text(json.dumps([*CATEGORIES, *kept], indent=2) + "\n", encoding="utf-8")
