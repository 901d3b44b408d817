"""``--chaos-shard K/N``: run the K-th of N disjoint shards of the collection (nightly CI matrix).

The split is pytest-split's (``--splits N --group K``, its ``least_duration`` algorithm);
this option is the project's name for it, validated with the other chaos options, so the
nightly workflow and teams' CI keep one ``K/N`` option:

* with a durations file (``--chaos-durations PATH``, ``{node id: seconds}``, pytest-split's
  ``.test_durations`` format, which becomes its ``--durations-path``): longest test first onto
  the least loaded shard, a test missing from the file counting as the mean of the known ones;
* without one: every test counts the same, so the shards differ by one test at most.

The split is a function of the selected tests (after ``-k``/``-m``), their collection order
and the durations, so every runner that collects the same tests with the same file keeps
its own shard and the N shards together run every test once (the nightly hands one file to
every shard for that reason). ``--chaos-store-durations PATH`` writes this session's
durations (merged into what the file already holds) for the next night's split: a file of
its own, so a shard reads last night's and writes tonight's.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pytest

from chaos.pytest_plugin import settings

__all__ = ["Shard", "parse_shard", "split", "load_durations"]

DURATIONS_ENV = "CHAOS_DURATIONS"
ALGORITHM = "least_duration"      # balances better than duration_based_chunks; order-independent but for ties


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(spec: str) -> Shard:
    """``"K/N"`` -> Shard(K, N); a bad spec raises ValueError naming the fix."""
    text = spec.strip()
    head, sep, tail = text.partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index = count = None
    if not sep or index is None or count is None:
        raise ValueError(f"--chaos-shard={spec}: give K/N, two whole numbers such as 1/4 "
                         f"(shard K of N, 1 <= K <= N)")
    if count < 1:
        raise ValueError(f"--chaos-shard={spec}: the shard count N must be 1 or more (e.g. 1/4)")
    if not 1 <= index <= count:
        raise ValueError(f"--chaos-shard={spec}: shards are numbered 1 to {count}; "
                         f"give K between 1 and {count} (e.g. {min(max(index, 1), count)}/{count})")
    return Shard(index, count)


class _Test:
    """A stand-in for a collected item, as pytest-split sees one: its node id and its repr
    (``<Function name>``, what pytest-split sorts ties by)."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def __repr__(self) -> str:
        return f"<Function {self.nodeid.rpartition('::')[2]}>"


def split(nodeids: Sequence[str], count: int, durations: dict[str, float] | None = None) -> list[list[str]]:
    """The `count` shards pytest-split makes of `nodeids` (collection order) with `durations`:
    what ``--chaos-shard K/N`` keeps on each runner (each shard keeps the collection order)."""
    from pytest_split.algorithms import Algorithms
    groups = Algorithms[ALGORITHM].value(count, [_Test(n) for n in nodeids], dict(durations or {}))
    return [[t.nodeid for t in group.selected] for group in groups]


def load_durations(path: Path) -> dict[str, float]:
    """``{node id: seconds}`` from `path`; {} when it does not exist; ValueError naming the fix."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"durations file {path}: {exc}; delete it or write it again with "
                         f"--chaos-store-durations {path}") from None
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise ValueError(f"durations file {path}: expected a JSON object {{node id: seconds}}; "
                         f"delete it or write it again with --chaos-store-durations {path}")
    return {str(k): float(v) for k, v in data.items()}


_SHARD = pytest.StashKey[Shard | None]()
_DURATIONS = pytest.StashKey[tuple[Path | None, dict[str, float]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-shard", metavar="K/N",
                 help="run only shard K of N disjoint shards of the selected tests (CI matrix): "
                      "pytest-split's --splits N --group K, balanced by --chaos-durations when that "
                      "file exists, by count otherwise")
    settings.add(parser, "--chaos-durations", metavar="PATH",
                 help=f"recorded test durations ({{node id: seconds}}) that balance --chaos-shard "
                      f"(default: ${DURATIONS_ENV}; a missing file means balance by count)")
    settings.add(parser, "--chaos-store-durations", metavar="PATH",
                 help="write this session's test durations to PATH (merged with what it holds)")


@pytest.hookimpl(tryfirst=True)    # before pytest-split's pytest_configure reads the options set here
def pytest_configure(config: pytest.Config) -> None:
    spec = settings.value(config, "chaos_shard")
    try:
        shard = config.stash[_SHARD] = parse_shard(spec) if spec is not None else None
        raw = settings.value(config, "chaos_durations") or os.environ.get(DURATIONS_ENV)
        path = Path(raw) if raw else None
        config.stash[_DURATIONS] = (path, load_durations(path) if path and shard else {})
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if shard is not None:
        if not config.pluginmanager.hasplugin("pytest-split"):
            raise pytest.UsageError(f"--chaos-shard={spec}: the split is pytest-split's, which is not installed "
                                    f"(or disabled with -p no:pytest-split); pip install pytest-split")
        config.option.splits, config.option.group = shard.count, shard.index
        config.option.splitting_algorithm = ALGORITHM
        # no durations: "" cannot be opened, so pytest-split counts every test the same (a
        # .test_durations in the working directory, its default, is not this option's)
        config.option.durations_path = str(path) if path and config.stash[_DURATIONS][1] else ""
    store = settings.value(config, "chaos_store_durations")
    if store:
        try:
            Path(store).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--chaos-store-durations={store}: cannot create {Path(store).parent} "
                                    f"({exc.strerror or exc}); give a path in a directory you can write") from None
    if store and getattr(config, "workerinput", None) is None:  # xdist workers' reports reach the controller
        config.pluginmanager.register(DurationRecorder(Path(store)), "chaos-store-durations")


def pytest_report_collectionfinish(config: pytest.Config, items: Sequence[pytest.Item]) -> str | None:
    shard = config.stash.get(_SHARD, None)
    if shard is None:
        return None
    path, durations = config.stash[_DURATIONS]
    how = f"balanced by the durations in {path}" if durations else "balanced by count (no durations file)"
    return f"chaos shard {shard}: {len(items)} selected tests (pytest-split, {ALGORITHM}), {how}"


class DurationRecorder:
    """Sums setup + call + teardown per test and writes them at the end (controller only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.measured: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.measured[report.nodeid] = self.measured.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        try:
            merged = load_durations(self.path)
        except ValueError:
            merged = {}   # unreadable: this session's figures replace it
        merged.update({k: round(v, 3) for k, v in self.measured.items()})
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
        tmp.replace(self.path)


def shard_ids(nodeids: Iterable[str], shard: str, durations: dict[str, float] | None = None) -> list[str]:
    """The ids shard `shard` ("K/N") keeps: the same split the option applies."""
    ids = list(nodeids)
    parsed = parse_shard(shard)
    return split(ids, parsed.count, durations)[parsed.index - 1]
