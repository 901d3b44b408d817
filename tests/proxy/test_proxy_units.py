"""Unit tests of the proxy's pure parts: Go-style JSON decoding, float32 output, slicing."""
from __future__ import annotations

import random

import pytest

from chaos.proxy import gojson
from chaos.proxy.relay import split_host_port
from chaos.proxy.toxics import TOXIC_TYPES, AttributeError_
from chaos.proxy.toxics.slicer import slice_bounds


@pytest.mark.parametrize("raw, message", [
    (b"", "EOF"),
    (b"   \n", "EOF"),
    (b'{"a": 1', "unexpected EOF"),
    (b"nope", "invalid character 'n' looking for beginning of value"),
    (b'{"a" 1}', "invalid character '1' after object key"),
    (b'{"a": 1 "b": 2}', "invalid character '\"' after object key:value pair"),
    (b"[1 2]", "invalid character '2' after array element"),
    (b"{1: 2}", "invalid character '1' looking for beginning of object key string"),
])
def test_decode_errors_use_gos_words(raw, message):
    with pytest.raises(gojson.BodyError) as exc:
        gojson.decode(raw)
    assert str(exc.value) == message


def test_decode_reads_only_the_first_value_like_a_go_decoder():
    assert gojson.decode(b'{"a": 1} trailing garbage') == {"a": 1}


def test_fields_match_case_insensitively_ignore_unknown_and_null():
    got = gojson.fields({"NAME": "x", "upstream": None, "other": 1}, "Proxy",
                        {"name": str, "upstream": str}, "toxiproxy.Proxy")
    assert got == {"name": "x"}


def test_fields_reject_wrong_types_and_float32_overflow():
    with pytest.raises(gojson.BodyError, match="cannot unmarshal bool into Go struct field T.toxicity of type float32"):
        gojson.fields({"toxicity": True}, "T", {"toxicity": float}, "T")
    with pytest.raises(gojson.BodyError, match="cannot unmarshal number 1e40 into"):
        gojson.fields(gojson.decode(b'{"toxicity": 1e40}'), "T", {"toxicity": float}, "T")
    with pytest.raises(gojson.BodyError, match="cannot unmarshal array into Go value of type X"):
        gojson.fields([], "T", {}, "X")


@pytest.mark.parametrize("value, shown", [(1.0, 1), (0.5, 0.5), (0.3, 0.3), (0.0, 0), (0.1234567891, 0.12345679)])
def test_float32_prints_like_go(value, shown):
    assert gojson.float32(value) == shown


def test_attributes_decode_over_current_values_with_go_errors():
    latency = TOXIC_TYPES["latency"]
    assert latency.decode({"latency": 5, "jitter": 1}, {"Jitter": 7, "x": "ignored"}) == {"latency": 5, "jitter": 7}
    with pytest.raises(AttributeError_, match="cannot unmarshal number 99999999999999999999 into Go struct"):
        latency.decode(latency.defaults(), {"latency": 99999999999999999999})
    with pytest.raises(AttributeError_, match="LatencyToxic.attributes.latency of type int64"):
        latency.decode(latency.defaults(), {"latency": [1]})
    assert TOXIC_TYPES["slicer"].attributes == {"average_size": "int", "size_variation": "int", "delay": "int"}


@pytest.mark.parametrize("length, average, variation", [(1009, 10, 5), (100, 10, 0), (7, 10, 5), (5000, 1, 0), (50, 0, 3)])
def test_slice_bounds_cover_the_chunk_in_order(length, average, variation):
    bounds = slice_bounds(length, average, variation, random.Random(1))
    assert bounds[0] == 0 and bounds[-1] == length
    assert all(a < b for a, b in zip(bounds, bounds[1:]))
    if average > 0 and length > average + variation:
        assert max(b - a for a, b in zip(bounds, bounds[1:])) <= average + max(variation, 0) * 2 + 1


def test_split_host_port_names_the_problem():
    assert split_host_port("127.0.0.1:80") == ("127.0.0.1", 80)
    assert split_host_port("[::1]:80") == ("::1", 80)
    with pytest.raises(ValueError, match="missing port in address"):
        split_host_port("localhost")
    with pytest.raises(ValueError, match="unknown port"):
        split_host_port("localhost:http")
