"""A small real suite for tests/cells: run as a child pytest, in the mode $CHAOS_CELLS_MODE.

cells: two reference cells that hold; mismatch: a cell judged by a bound it cannot meet and
one never checked; vanish: the summary's directory disappears during the session.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from chaos.expectations import Expectation, ge

MODE = os.environ.get("CHAOS_CELLS_MODE", "cells")
OUT = Path(os.environ.get("CHAOS_SCENARIO_OUT") or "/nonexistent-chaos-scenario-out")
only = {mode: pytest.mark.skipif(MODE != mode, reason=f"mode {mode}") for mode in ("cells", "mismatch", "vanish")}


def _record(name: str, outcome) -> None:
    (OUT / f"{name}.root").write_text(str(outcome.run_root))


@only["cells"]
def test_s1_holds(chaos_cell):
    _record("s1", chaos_cell("s1"))


@only["cells"]
def test_baseline_is_wrong_every_run(chaos_cell):
    _record("baseline", chaos_cell("baseline"))


@only["mismatch"]
def test_a_bound_that_cannot_hold(chaos_cell):
    chaos_cell("s1", expected=Expectation.of(lost=ge(1)))


@only["mismatch"]
def test_a_cell_never_checked(chaos_cell):
    _record("unchecked", chaos_cell("s1", check=False))


@only["vanish"]
def test_the_summary_dir_vanishes():
    shutil.rmtree(os.environ["CHAOS_CELLS_VANISH"])


@only["cells"]
def test_failpoints_need_an_explicit_expectation(chaos_cell):
    with pytest.raises(ValueError, match="pass expected=False"):
        chaos_cell("s1", failpoints={"consumer": {"before_apply": {"action": "pause", "pause_ms": 1}}})
