"""The scorecard's catalogue comes from the fault registry; bad --faults are refused."""
from __future__ import annotations

import pytest

from chaos.blackbox.config import load_config
from chaos.errors import BadArguments
from chaos.scorecard.plan import CELLS, catalogue, plan
from faults.registry import fault_names

CONFIG = "examples/redis_py_cas.toml"


@pytest.fixture(scope="module")
def config():
    return load_config(CONFIG)


@pytest.mark.parametrize("topology", ["replica", "sentinel"])
def test_every_registered_fault_is_a_cell_or_left_out_with_a_reason(config, topology):
    cells = catalogue(topology, config)
    assert {c.fault for c in cells} == set(fault_names())
    assert all(c.spec.startswith(c.fault) for c in cells)
    left_out = {c.fault: c.skipped for c in cells if c.skipped}
    assert "kill-dispatcher" in left_out
    run = {c.fault for c in cells if not c.skipped}
    assert {"none", "kill-consumer", "pause", "publish-blip", "xautoclaim", "redis-restart", "poison"} <= run
    assert [c.spec for c in cells if c.fault == "poison"] == ["poison:source=config"]   # its [poison] payload


def test_poison_runs_only_where_the_config_declares_a_payload():
    cells = {c.fault: c for c in catalogue("replica", load_config("examples/redis_py_ack_first.toml"))}
    assert "declares no [poison] payload" in cells["poison"].skipped
    with pytest.raises(BadArguments, match=r"poison does not fit this scorecard: the config declares no \[poison\]"):
        plan("poison", "replica", load_config("examples/redis_py_ack_first.toml"))


def test_failover_modes_follow_the_topology(config):
    replica = {c.fault: c for c in catalogue("replica", config)}
    sentinel = {c.fault: c for c in catalogue("sentinel", config)}
    assert replica["sentinel-failover"].skipped == "needs --topology sentinel"
    assert not replica["promote-replica"].skipped
    assert sentinel["promote-replica"].skipped == "needs --topology replica"
    assert len([c for c in catalogue("sentinel", config) if c.fault == "sentinel-failover"]) == 2


def test_a_fault_without_a_row_runs_with_its_defaults(config, monkeypatch):
    """A fault that lands in the registry joins the catalogue without a row here."""
    monkeypatch.delitem(CELLS, "pause")
    assert [c.spec for c in catalogue("replica", config) if c.fault == "pause"] == ["pause"]
    monkeypatch.delitem(CELLS, "xautoclaim")   # its default waits at a failpoint: at=time is tried
    assert [c.spec for c in catalogue("replica", config) if c.fault == "xautoclaim"] == ["xautoclaim:at=time"]


def test_faults_list_picks_cells_and_takes_parameters(config):
    assert [c.spec for c in plan("kill-consumer", "replica", config)] == ["kill-consumer:at=holding"]
    assert [c.fault for c in plan("latency", "replica", config)] == ["latency", "latency"]
    assert [c.spec for c in plan("pause:duration_ms=3000,none", "replica", config)] == \
        ["pause:duration_ms=3000", "none"]
    assert [c.spec for c in plan("maxmemory:after_entries=100,duration_ms=300,none,pause:at_ms=100,duration_ms=900",
                                 "replica", config)] == \
        ["maxmemory:after_entries=100,duration_ms=300", "none", "pause:at_ms=100,duration_ms=900"]


@pytest.mark.parametrize("faults, topology, message", [
    ("sentinel-failover", "replica", "add --topology sentinel"),
    ("promote-replica", "sentinel", "use --topology replica"),
    ("no-such-fault", "replica", "unknown fault 'no-such-fault'"),
    ("kill-dispatcher", "replica", "leave it out"),
    ("poison:key=42", "replica", "on a black-box worker give --fault poison:source=config"),
    ("xautoclaim:at=before_apply", "replica", "act from outside"),
    ("kill-consumer", "cluster", "--topology 'cluster'"),
    (",", "replica", "names no fault"),
])
def test_bad_faults_are_refused_naming_the_fix(config, faults, topology, message):
    with pytest.raises(BadArguments, match=message.replace("(", r"\(").replace("'", "'")):
        plan(faults, topology, config)


def test_a_black_box_run_of_poison_needs_a_declared_payload():
    from chaos.blackbox.session import preflight
    with pytest.raises(BadArguments, match=r"has no \[poison\] table: add one"):
        preflight("python -m examples.redis_py_ack_first", load_config("examples/redis_py_ack_first.toml"),
                  ["poison:source=config"])
    preflight("python -m examples.redis_py_cas", load_config(CONFIG), ["poison:source=config"])   # declared
