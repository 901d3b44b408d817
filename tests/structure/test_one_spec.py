"""One `name:k=v` grammar for every spec a user writes: presets, faults, expectation lookups
and topologies refuse the same bad input with the same words (chaos/params.py parses them all)."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from chaos.cluster.sentinel import parse_topology
from chaos.errors import BadArguments
from chaos.expectations import expect
from chaos.strategies.presets import resolve
from faults.registry import get_fault

SPECS: dict[str, tuple[Callable[[str], Any], str]] = {
    "preset": (resolve, "s2:shards=8"),
    "fault": (get_fault, "pause:at_ms=100"),
    "expectation lookup": (lambda spec: expect(spec, "none"), "s2:shards=8"),
    "topology": (parse_topology, "sentinel:quorum=2"),
}


@pytest.mark.parametrize("kind", SPECS)
def test_a_key_given_twice_is_refused_naming_the_key(kind: str) -> None:
    parse, spec = SPECS[kind]
    parse(spec)   # the spec itself is good
    key, _, value = spec.partition(":")[2].partition("=")
    with pytest.raises(BadArguments, match=f"{key} is given twice; keep one {key}="):
        parse(f"{spec},{key}={value}")


@pytest.mark.parametrize("kind", SPECS)
def test_a_pair_without_a_value_is_refused_with_the_shape_to_write(kind: str) -> None:
    parse, spec = SPECS[kind]
    name, _, pair = spec.partition(":")
    key = pair.partition("=")[0]
    with pytest.raises(BadArguments, match=f"'{key}' is not k=v; write e.g. {name}:{key}=VALUE"):
        parse(f"{name}:{key}")
