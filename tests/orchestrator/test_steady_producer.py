"""A cell where no fault acts on the publish path runs a steady producer (2 s socket timeout
unless its spec named one): under load (~30) the s3 cell with no fault had its 256-XADD pipeline
outlast the default 250 ms, and the retried copies read as duplicated 256 / reordered 227 /
wrong 1/2. The rule is the faults' (Fault.touches_publish), the spec's text stays as given."""
from __future__ import annotations

import random

import pytest

from chaos.cellspec import Spec
from chaos.orchestrator.cell import cell_strategy
from chaos.strategies.presets import STEADY_TIMEOUT_MS, resolve
from faults.interface import Fault
from faults.registry import FAULTS, fault_class, make_fault


def _timeout(strategy) -> float:
    return strategy.producer.timeout_ms


def test_the_s3_cell_with_no_fault_gets_a_steady_producer():
    strategy = resolve("s3")
    assert _timeout(strategy) == 250.0
    steady = cell_strategy(strategy, [])
    assert _timeout(steady) == STEADY_TIMEOUT_MS == 2000.0
    assert steady.label() == "s3" and steady.overrides == {} and steady.replaced == {}
    # what the producer worker process is built from
    plans = steady.producer.plans(steady.workload.make_events(random.Random(0)))
    assert plans and all(p.spec["producer"]["params"]["timeout_ms"] == STEADY_TIMEOUT_MS for p in plans)


@pytest.mark.parametrize("fault", ["none", "pg-reset", "xautoclaim", "poison:key=j7", "long-job"])
def test_faults_off_the_publish_path_keep_it_steady(fault):
    assert _timeout(cell_strategy(resolve("s3"), [make_fault(Spec.parse(fault))])) == STEADY_TIMEOUT_MS


@pytest.mark.parametrize("fault", ["publish-blip", "partition", "latency", "pause", "redis-restart",
                                   "promote-replica", "sentinel-failover", "maxmemory", "nemesis",
                                   "replica-overflow", "group-loss"])
def test_a_fault_on_the_publish_path_keeps_the_default(fault):
    # one such fault among others is enough
    faults = [make_fault(Spec.parse("pg-reset")), make_fault(Spec.parse(fault))]
    assert _timeout(cell_strategy(resolve("s3"), faults)) == 250.0


def test_a_new_fault_acts_on_the_publish_path_unless_it_says_otherwise():
    class Unknown(Fault):
        name = "unknown-test-fault"
    assert Unknown.touches_publish
    assert _timeout(cell_strategy(resolve("s3"), [Unknown()])) == 250.0


@pytest.mark.parametrize("preset, parts, timeout", [
    ("s3:timeout_ms=300", None, 300.0),                        # an override
    ("s3:producer.timeout_ms=250", None, 250.0),               # the default, named
    ("s3", {"producer": "retrying:timeout_ms=250"}, 250.0),    # a replaced part
    ("ack-after", None, 5000.0),                               # the preset's own part
    ("s2:reshard_after=300,reshard_to=8,reshard_mode=drain,timeout_ms=2000", None, 2000.0),
])
def test_a_timeout_the_spec_names_stays(preset, parts, timeout):
    assert _timeout(cell_strategy(resolve(preset, parts=parts), [])) == timeout


def test_every_registered_fault_declares_a_bool():
    for name in FAULTS:
        assert isinstance(fault_class(name).touches_publish, bool), name
