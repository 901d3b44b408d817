"""Preset resolution and parameter checking: bad input is rejected before anything starts."""
from __future__ import annotations

import pytest

from chaos.errors import BadArguments
from chaos.params import Param, parse_spec
from chaos.strategies.presets import PRESETS, resolve


def test_every_preset_resolves_with_its_defaults():
    for name in PRESETS:
        strategy = resolve(name)
        assert strategy.preset == name
        assert set(strategy.parts()) == {"producer", "delivery", "guard", "ack", "workload"}


def test_override_goes_to_the_part_that_declares_it():
    strategy = resolve("s2:shards=8")
    assert strategy.delivery.shards == 8
    assert strategy.label() == "s2:shards=8"
    assert [s.endswith(".7") for s in strategy.delivery.streams()].count(True) == 1


def test_slot_prefix_and_whole_part_replacement():
    strategy = resolve("s1:workload.cost_ms=3", parts={"workload": "many-orders:keys=5"})
    assert strategy.workload.name == "many-orders"
    assert strategy.workload.keys == 5 and strategy.workload.cost_ms == 3.0


@pytest.mark.parametrize("spec, words", [
    ("nope", ["unknown preset 'nope'", "baseline"]),
    ("s2:shards=0", ["shards=0", "minimum 1"]),
    ("s2:shards=two", ["shards='two'", "int"]),
    ("s1:foo=1", ["no parameter 'foo'", "created_ms"]),
    ("baseline:created_ms=-5", ["created_ms=-5", "minimum 0"]),
    ("s1:count", ["'count' is not k=v"]),
    ("s5:isolation=snapshot", ["isolation='snapshot'", "rc, rr"]),
    ("ack-on-receive:max_attempts=3", ["on-receive", "max_attempts", "mode=after"]),
    ("s2:reshard_to=4", ["reshard_to=4 equals shards"]),
    ("poison-dlq:poison_every=9000", ["poison_every=9000 > jobs=5000"]),
])
def test_bad_presets_name_the_problem(spec, words):
    with pytest.raises(BadArguments) as info:
        resolve(spec)
    for word in words:
        assert word in str(info.value)


def test_unknown_part_slot_is_rejected():
    with pytest.raises(BadArguments, match="no such part"):
        resolve("s1", parts={"engine": "x"})


def test_param_parsing_types():
    assert Param("flag", False, "x").convert("o", "yes") is True
    assert Param("n", 1, "x").convert("o", " 7 ") == 7
    with pytest.raises(BadArguments):
        Param("n", 1, "x").convert("o", 2.5)
    assert parse_spec("s2:shards=8, count = 3") == ("s2", {"shards": "8", "count": "3"})
    with pytest.raises(BadArguments, match="given twice"):
        parse_spec("s2:shards=8,shards=9")
