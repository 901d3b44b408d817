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

    @property
    def nodeid(self) -> str:
        return f"{self.module}::{self.name}"

    def get_closest_marker(self, name: str) -> Any:
        if name == "slow" and self.slow is not None:
            return pytest.mark.slow(**self.slow).mark
        return None


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
