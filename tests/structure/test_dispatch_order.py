"""The xdist dispatch order of the root conftest: the longest tests first, each of the first
`workers` with a short test (not a long one) queued behind it."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _conftest() -> Any:
    spec = importlib.util.spec_from_file_location("root_conftest_for_test", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class FakeItem:
    name: str
    slow: dict | None = None
    fixturenames: list[str] = field(default_factory=list)
    module: str = "tests/x/test_fast.py"
    skip: bool = False

    @property
    def nodeid(self) -> str:
        return f"{self.module}::{self.name}"

    def get_closest_marker(self, name: str) -> Any:
        if name == "slow" and self.slow is not None:
            return pytest.mark.slow(**self.slow).mark
        return None

    def iter_markers(self) -> list[Any]:
        marks = [pytest.mark.skipif(True, reason="nightly").mark] if self.skip else []
        return marks + [m for m in [self.get_closest_marker("slow")] if m is not None]


def test_longest_first_and_a_short_test_behind_each_of_the_first_workers():
    order = _conftest().dispatch_order
    light = [FakeItem(f"unit{i}") for i in range(10)]
    items = light[:3] + [FakeItem("cell-a", fixturenames=["chaos_cell"]), FakeItem("rate", slow={"seconds": 180}),
                         FakeItem("slow", slow={}), FakeItem("cell-b", fixturenames=["blackbox"])] + light[3:]
    names = [i.name for i in order(items, workers=2)]
    # pairs (long, short) for the 2 workers, then the rest longest first, ties in collection order
    assert names[:4] == ["rate", "unit8", "slow", "unit9"]
    assert names[4:6] == ["cell-a", "cell-b"]
    assert names[6:] == [f"unit{i}" for i in range(8)]
    assert sorted(names) == sorted(i.name for i in items)


def test_a_module_that_runs_child_sessions_goes_before_plain_tests_and_after_cells():
    conftest = _conftest()
    module = min(conftest.CHILD_SESSION_MODULES, key=conftest.CHILD_SESSION_MODULES.get)   # below a cell
    items = [FakeItem("plain"), FakeItem("child", module=module), FakeItem("cell", fixturenames=["chaos_cell"])]
    assert [i.name for i in conftest.dispatch_order(items, workers=1)] == ["cell", "child", "plain"]


def test_without_enough_short_tests_the_order_is_simply_longest_first():
    order = _conftest().dispatch_order
    items = [FakeItem("a", fixturenames=["chaos_cell"]), FakeItem("b", slow={}), FakeItem("c")]
    assert [i.name for i in order(items, workers=4)] == ["b", "a", "c"]
    assert [i.name for i in order(items, workers=1)] == ["b", "a", "c"]


def test_a_single_long_test_goes_before_the_cells_and_its_module():
    conftest = _conftest()
    prefix, seconds = next(iter(conftest.LONG_TESTS.items()))
    module, _, name = prefix.partition("::")
    items = [FakeItem("cell", fixturenames=["chaos_cell"]), FakeItem(name + "x]", module=module,
                                                                     fixturenames=["chaos_cell"])]
    assert seconds > conftest.CELL_SECONDS
    assert [i.name for i in conftest.dispatch_order(items, workers=1)] == [name + "x]", "cell"]


def test_a_measured_figure_goes_before_a_slow_markers_guess():
    conftest = _conftest()
    prefix, seconds = next(iter(conftest.LONG_TESTS.items()))
    module, _, name = prefix.partition("::")
    long = FakeItem(name + "x]", module=module, slow={"seconds": seconds * 10})
    assert conftest.expected_seconds(long) == seconds
    guessed = FakeItem("guessed", slow={"seconds": seconds + 1})
    assert [i.name for i in conftest.dispatch_order([long, guessed], workers=1)] == ["guessed", long.name]


def test_every_figure_names_a_test_that_exists():
    """A renamed test would silently lose its figure (and run late): each LONG_TESTS prefix names
    a test function in its module, each CHILD_SESSION_MODULES entry a module."""
    conftest = _conftest()
    for prefix in conftest.LONG_TESTS:
        module, _, name = prefix.partition("::")
        assert (ROOT / module).is_file(), prefix
        assert f"def {name.partition('[')[0]}" in (ROOT / module).read_text(), prefix
    for module in conftest.CHILD_SESSION_MODULES:
        assert (ROOT / module).is_file(), module


def test_a_test_marked_to_skip_costs_nothing():
    conftest = _conftest()
    assert conftest.expected_seconds(FakeItem("nightly", slow={"seconds": 600}, skip=True)) == 0.0
    assert conftest.expected_seconds(FakeItem("ci", slow={"seconds": 600})) == 600.0


def test_two_cpu_heavy_tests_do_not_start_together_when_light_ones_can_go_between():
    """Two workers, two CPU_HEAVY tests (about 20 s each) and five 5 s cells: longest first
    would start both heavy tests at once; instead the cells go on the second worker until the
    first heavy test ends, then the second starts."""
    conftest = _conftest()
    items = []
    for prefix in list(conftest.CPU_HEAVY)[:2]:
        module, _, name = prefix.partition("::")
        items.append(FakeItem(name + "x", module=module))
    items += [FakeItem(f"cell{i}", fixturenames=["chaos_cell"]) for i in range(5)]
    figures = {i.name: conftest.expected_seconds(i) for i in items}
    assert sum(figures[f"cell{i}"] for i in range(5)) >= max(figures[i.name] for i in items[:2])
    order = conftest.one_heavy_at_a_time(sorted(items, key=conftest.expected_seconds, reverse=True), workers=2)
    free, heavy = [0.0, 0.0], []
    for item in order:                     # replay the dispatch: the next test to the first free worker
        now = min(free)
        free[free.index(now)] = now + figures[item.name]
        if conftest.cpu_heavy(item):
            heavy.append((now, now + figures[item.name]))
    (_, first_end), (second_start, _) = sorted(heavy)
    assert second_start >= first_end, [i.name for i in order]
    assert sorted(i.name for i in order) == sorted(i.name for i in items)
    # with nothing light left to run, a heavy test is not held back
    assert conftest.one_heavy_at_a_time(items[:2], workers=2) == items[:2]
