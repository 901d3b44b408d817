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


@pytest.mark.parametrize("faults", [
    ["nemesis:faults=latency/pause,window_ms=200", "kill-consumer:at_ms=5"],
    ["kill-consumer", "nemesis:faults=pause"],
])
def test_a_list_inside_a_spec_survives_a_cells_fault_text(faults: list[str]) -> None:
    """`+` joins a cell's faults (the summary row's `fault`, `matrix --faults a+b`) and `/` a list
    parameter's items, so reading a cell's fault text back gives the same faults and the same values."""
    from chaos.cellspec import CellSpec, split_faults
    cell = CellSpec.parse("s1", faults)
    again = CellSpec.parse("s1", split_faults(cell.fault_text))
    assert again == cell and again.fault_texts == faults
    nemesis = next(get_fault(text) for text in faults if text.startswith("nemesis"))
    assert nemesis.spec == next(text for text in faults if text.startswith("nemesis"))


@pytest.mark.parametrize("spec, fix", [
    ("nemesis:faults=latency+pause", "write faults=latency/pause"),
    ("p1-per-key:rollback=e2-2+e3-1", "write rollback=e2-2/e3-1"),
])
def test_plus_inside_a_spec_is_refused_naming_the_slash(spec: str, fix: str) -> None:
    parse = get_fault if spec.startswith("nemesis") else resolve
    with pytest.raises(BadArguments, match=f"joined by '/', not '\\+'.*{fix}"):
        parse(spec)
