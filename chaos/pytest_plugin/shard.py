"""``--chaos-shard K/N``: run the K-th of N disjoint shards of the collection (nightly CI matrix).

Each CI runner collects the same tests and keeps only its shard, so N runners together run
every collected test exactly once. The split is a pure function of the selected test ids
(and of the durations file, when there is one), so every xdist worker of a runner and every
rerun of a night deselect the same tests:

* with a durations file (``--chaos-durations PATH``, ``{node id: seconds}``, the format
  pytest-split's ``.test_durations`` uses): longest test first onto the least loaded shard,
  a test missing from the file counting as the mean of the known ones;
* without one: round-robin over the ids ordered by a hash of each id, so shards differ by
  one test at most and a test's shard does not depend on the collection order.

``--chaos-store-durations PATH`` writes the durations of this session (merged into what
the file already holds) for the next night's split.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pytest

from chaos.pytest_plugin import settings

__all__ = ["Shard", "parse_shard", "split", "load_durations"]

DURATIONS_ENV = "CHAOS_DURATIONS"


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


def _hash(nodeid: str) -> str:
    return hashlib.sha256(nodeid.encode()).hexdigest()


def split(nodeids: Sequence[str], count: int, durations: dict[str, float] | None = None) -> list[list[str]]:
    """The `count` shards of `nodeids` (each keeps the collection order): disjoint, covering all."""
    buckets: list[list[str]] = [[] for _ in range(count)]
    if durations:
        known = [durations[n] for n in nodeids if n in durations]
        mean = sum(known) / len(known) if known else 1.0
        load = [0.0] * count
        # longest first, ties broken by id hash so the result never depends on collection order
        for nodeid in sorted(nodeids, key=lambda n: (-durations.get(n, mean), _hash(n))):
            target = min(range(count), key=lambda i: (load[i], i))
            buckets[target].append(nodeid)
            load[target] += durations.get(nodeid, mean)
    else:
        for position, nodeid in enumerate(sorted(nodeids, key=_hash)):
            buckets[position % count].append(nodeid)
    order = {n: i for i, n in enumerate(nodeids)}
    return [sorted(b, key=order.__getitem__) for b in buckets]


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
_SELECTED = pytest.StashKey[tuple[int, int]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-shard", metavar="K/N",
                 help="run only shard K of N disjoint shards of the selected tests (CI matrix); "
                      "balanced by --chaos-durations when that file exists, by count otherwise")
    settings.add(parser, "--chaos-durations", metavar="PATH",
                 help=f"recorded test durations ({{node id: seconds}}) that balance --chaos-shard "
                      f"(default: ${DURATIONS_ENV}; a missing file means balance by count)")
    settings.add(parser, "--chaos-store-durations", metavar="PATH",
                 help="write this session's test durations to PATH (merged with what it holds)")


def pytest_configure(config: pytest.Config) -> None:
    spec = settings.value(config, "chaos_shard")
    try:
        config.stash[_SHARD] = parse_shard(spec) if spec is not None else None
        raw = settings.value(config, "chaos_durations") or os.environ.get(DURATIONS_ENV)
        path = Path(raw) if raw else None
        config.stash[_DURATIONS] = (path, load_durations(path) if path and config.stash[_SHARD] else {})
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    store = settings.value(config, "chaos_store_durations")
    if store:
        try:
            Path(store).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--chaos-store-durations={store}: cannot create {Path(store).parent} "
                                    f"({exc.strerror or exc}); give a path in a directory you can write") from None
    if store and getattr(config, "workerinput", None) is None:  # xdist workers' reports reach the controller
        config.pluginmanager.register(DurationRecorder(Path(store)), "chaos-store-durations")


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: shard what is actually selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = config.stash.get(_SHARD, None)
    if shard is None:
        return
    _, durations = config.stash[_DURATIONS]
    keep = set(split([item.nodeid for item in items], shard.count, durations)[shard.index - 1])
    selected = [item for item in items if item.nodeid in keep]
    dropped = [item for item in items if item.nodeid not in keep]
    config.stash[_SELECTED] = (len(selected), len(items))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = selected


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    shard = config.stash.get(_SHARD, None)
    if shard is None:
        return None
    path, durations = config.stash[_DURATIONS]
    mine, total = config.stash.get(_SELECTED, (0, 0))
    how = f"balanced by the durations in {path}" if durations else "balanced by count (no durations file)"
    return f"chaos shard {shard}: {mine} of {total} selected tests, {how}"


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
