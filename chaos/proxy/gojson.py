"""JSON the way Toxiproxy's Go server reads and writes it.

Clients written against the real server match on its error texts, so request bodies are
decoded with Go's rules (the first value only, unknown keys ignored, keys matched
case-insensitively, `null` keeps the default) and its error wording; numbers keep their
literal text so `1.5` for an int64 field is reported as Go reports it.
"""
from __future__ import annotations

import json
import struct
from typing import Any

from chaos.proxy.toxics.base import go_type_name


class BodyError(ValueError):
    """The request body cannot be decoded; the message is Go's json error text."""


class _FloatLiteral(float):
    """A JSON number that was written with a fraction or exponent, with its text."""

    text: str

    def __new__(cls, text: str) -> "_FloatLiteral":
        value = super().__new__(cls, float(text))
        value.text = text
        return value


_DECODER = json.JSONDecoder(parse_float=_FloatLiteral)
_FLOAT32_MAX = 3.4028234663852886e38


def decode(raw: bytes) -> Any:
    """Decode the first JSON value of a body (Go's json.Decoder ignores what follows)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"invalid character {raw[exc.start:exc.start + 1]!r} looking for beginning of value") from None
    stripped = text.lstrip(" \t\r\n")
    if not stripped:
        raise BodyError("EOF")
    try:
        value, _ = _DECODER.raw_decode(stripped)
    except json.JSONDecodeError as exc:
        raise BodyError(_go_syntax_error(exc)) from None
    return value


def _go_syntax_error(exc: json.JSONDecodeError) -> str:
    if exc.pos >= len(exc.doc.rstrip()):
        return "unexpected EOF"
    char = exc.doc[exc.pos]
    where = {
        "Expecting value": "looking for beginning of value",
        "Expecting ',' delimiter": "after object key:value pair" if _in_object(exc) else "after array element",
        "Expecting ':' delimiter": "after object key",
        "Expecting property name enclosed in double quotes": "looking for beginning of object key string",
    }.get(exc.msg, "looking for beginning of value")
    return f"invalid character {char!r} {where}"


def _in_object(exc: json.JSONDecodeError) -> bool:
    depth_obj = exc.doc[: exc.pos].count("{") - exc.doc[: exc.pos].count("}")
    depth_arr = exc.doc[: exc.pos].count("[") - exc.doc[: exc.pos].count("]")
    return depth_obj > 0 and (depth_arr <= 0 or exc.doc[: exc.pos].rfind("{") > exc.doc[: exc.pos].rfind("["))


def fields(body: Any, struct_name: str, schema: dict[str, type], go_value_type: str) -> dict[str, Any]:
    """Pick the known fields of a JSON object, checking their types as Go would.

    `schema` maps a field to str, bool, float or object (kept as-is); absent or null
    fields are left out, so the caller's defaults stay.
    """
    if not isinstance(body, dict):
        raise BodyError(f"json: cannot unmarshal {go_type_name(body)} into Go value of type {go_value_type}")
    go_types = {str: "string", bool: "bool", float: "float32", object: "interface {}"}
    out: dict[str, Any] = {}
    for key, value in body.items():
        name = key if key in schema else next((f for f in schema if f.lower() == key.lower()), None)
        if name is None or value is None:
            continue
        want = schema[name]
        ok = (
            want is object
            or (want is float and isinstance(value, (int, float)) and not isinstance(value, bool))
            or (want is not float and isinstance(value, want))
        )
        if not ok:
            raise BodyError(
                f"json: cannot unmarshal {go_type_name(value)} into Go struct field "
                f"{struct_name}.{name} of type {go_types[want]}"
            )
        if want is float and abs(float(value)) > _FLOAT32_MAX:
            literal = getattr(value, "text", None) or repr(value)
            raise BodyError(
                f"json: cannot unmarshal number {literal} into Go struct field {struct_name}.{name} of type float32"
            )
        out[name] = float(value) if want is float else value
    return out


def float32(value: float) -> float | int:
    """The value Go prints for a float32: rounded to float32, shortest text, ints bare."""
    f32 = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        text = f"{f32:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f32:
            number = float(text)
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
    return f32


def dumps(value: Any) -> bytes:
    """Compact JSON with no trailing newline, as Go's json.Marshal writes it."""
    return json.dumps(value, separators=(",", ":")).encode()
