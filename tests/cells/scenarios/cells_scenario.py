"""A small real suite for tests/cells: run as a child pytest, in the mode $CHAOS_CELLS_MODE.

cells: two reference cells that hold (baseline's race forced by its `hold` row, as CI runs it:
without the hold, a loaded machine let created's job end before paid's apply in 1 run of 2);
mismatch: a cell judged by a bound it cannot meet and
one never checked; vanish: the summary's directory disappears during the session; rig: the
cluster's own proxy server is SIGKILLed mid-run by a throwaway fault that declares it may
take nothing down (a rig failure), then a cell on the same worker.
"""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from chaos.expectations import Expectation, eq, ge
from chaos.expectations.ordering import FORCED
from chaos.params import Param
from faults.interface import FaultContext
from faults.registry import FAULTS
from faults.window import WindowFault

MODE = os.environ.get("CHAOS_CELLS_MODE", "cells")
OUT = Path(os.environ.get("CHAOS_SCENARIO_OUT") or "/nonexistent-chaos-scenario-out")
only = {mode: pytest.mark.skipif(MODE != mode, reason=f"mode {mode}")
        for mode in ("cells", "mismatch", "vanish", "rig")}


def _record(name: str, outcome) -> None:
    (OUT / f"{name}.root").write_text(str(outcome.run_root))


@only["cells"]
def test_s1_holds(chaos_cell):
    _record("s1", chaos_cell("s1"))


@only["cells"]
def test_baseline_is_wrong_every_run(chaos_cell):
    [forced] = [c for c in FORCED if c.preset == "baseline"]
    _record("baseline", chaos_cell(forced))


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


class KillProxyServer(WindowFault):
    """SIGKILL the cluster's own proxy server (a real process) during the workload. A test-only
    fault that spares nothing: whatever it takes down is the rig's failure, not a fault's."""

    name = "test-kill-proxy-server"
    description = "SIGKILL the cluster's embedded proxy server mid-run (tests/cells only)"
    params = (Param("at_ms", 150, "when, from the start of the workload"),
              Param("duration_ms", 50, "how long the window lasts (nothing heals it)"))

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        [proxy] = [c for c in ctx.cluster.components() if c.kind == "proxy"]
        os.kill(proxy.pid, signal.SIGKILL)
        return {"killed": proxy.pid}

    def stop(self, ctx: FaultContext) -> list[str]:
        return []


@only["rig"]
def test_the_proxy_server_dies_mid_run(chaos_cell, cluster, monkeypatch):
    if not [c for c in cluster.components() if c.kind == "proxy" and c.pid]:
        pytest.skip("the proxy server is a shared one (TOXIPROXY_URL), not this cluster's own process")
    monkeypatch.setitem(FAULTS, KillProxyServer.name, f"{__name__}:KillProxyServer")
    chaos_cell("s1", KillProxyServer.name, expected=Expectation.of(lost=eq(0), wrong_final_state_runs=eq(0)))


@only["rig"]
def test_the_next_cell_on_the_worker_runs_on_a_healthy_topology(chaos_cell):
    chaos_cell("s1")
