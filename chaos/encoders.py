"""Encoders: an event of the framework's event model -> the stream fields a library reads.

The user's consumer must run unchanged, so each event is written in the exact shape its
library's own publisher would write (checked in tests/blackbox/test_encoders.py by
decoding with the library itself):

* ``plain``: one stream field per mapped attribute, values as text (a hand-written
  redis-py consumer).
* ``taskiq``: taskiq-redis ``RedisStreamBroker.kick`` writes one field ``data`` holding
  the JSON of a ``TaskiqMessage`` (task_id, task_name, labels, args, kwargs); the
  mapped attributes become the task's keyword arguments.
* ``faststream``: FastStream's ``RedisBroker.publish(stream=...)`` writes one field
  ``__data__`` holding its binary message format v1 (magic, version, header offsets,
  headers, then the JSON body); the mapped attributes become the JSON object the
  subscriber's parameters are filled from.

Ids the library would generate (taskiq's task_id, FastStream's correlation_id) are
derived from the event id, so a run replays byte for byte. A leaf beside the event
model: the producer process encodes with it, the black-box runner decodes.
"""
from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EVENT_ATTRIBUTES = ("event_id", "key", "version", "etype")
Fields = dict[str, str | bytes]
_NAMESPACE = uuid.UUID("6f1c2a52-4b1e-4c59-9a3e-2f8d1b7c0a11")  # fixed: ids replay across runs


@dataclass(frozen=True)
class EncoderSpec:
    """How an event becomes stream fields the user's library reads unchanged."""

    format: str = "plain"
    fields: dict[str, str] = field(default_factory=lambda: {a: a for a in EVENT_ATTRIBUTES})
    task_name: str | None = None
    poison: dict[str, Any] = field(default_factory=dict)   # field -> value in a poison event's payload


def event_value(event: Any, attribute: str) -> Any:
    """An attribute of an event given as an object or a mapping."""
    return event[attribute] if isinstance(event, dict) else getattr(event, attribute)


def payload(spec: EncoderSpec, event: Any) -> dict[str, Any]:
    """The user's field names -> the event's values (version stays an int); a poison event
    (its ``poison`` attribute set) carries the spec's poison values instead."""
    out = {name: event_value(event, attr) for name, attr in spec.fields.items()}
    if spec.poison and _is_poison(event):
        out.update(spec.poison)
    return out


def _is_poison(event: Any) -> bool:
    return bool(event.get("poison") if isinstance(event, dict) else getattr(event, "poison", False))


def derived_id(event: Any, purpose: str) -> str:
    """A stable id for what a library would number at random (task_id, correlation_id)."""
    return uuid.uuid5(_NAMESPACE, f"{purpose}:{event_value(event, 'event_id')}").hex


def encode_plain(spec: EncoderSpec, event: Any) -> Fields:
    return {name: str(value) for name, value in payload(spec, event).items()}


def encode_taskiq(spec: EncoderSpec, event: Any) -> Fields:
    message = {
        "task_id": derived_id(event, "taskiq"),
        "task_name": spec.task_name,
        "labels": {},
        "labels_types": {},
        "args": [],
        "kwargs": payload(spec, event),
    }
    return {"data": json.dumps(message, separators=(",", ":")).encode()}


FASTSTREAM_MAGIC = b"\x89BIN\x0d\x0a\x1a\x0a"
FASTSTREAM_FORMAT_VERSION = 1


def _short_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def faststream_binary(body: bytes, headers: dict[str, str]) -> bytes:
    """FastStream's binary message format v1: magic, u16 version, u32 headers offset,
    u32 body offset, u16 header count, (u16-length key, u16-length value)*, body."""
    header_bytes = b"".join(_short_string(k) + _short_string(v) for k, v in headers.items())
    headers_start = len(FASTSTREAM_MAGIC) + 2 + 4 + 4
    body_start = headers_start + 2 + len(header_bytes)
    return b"".join((FASTSTREAM_MAGIC, struct.pack(">H", FASTSTREAM_FORMAT_VERSION),
                     struct.pack(">I", headers_start), struct.pack(">I", body_start),
                     struct.pack(">H", len(headers)), header_bytes, body))


def encode_faststream(spec: EncoderSpec, event: Any) -> Fields:
    body = json.dumps(payload(spec, event), separators=(",", ":")).encode()
    headers = {"correlation_id": derived_id(event, "faststream"), "content-type": "application/json"}
    return {"__data__": faststream_binary(body, headers)}


ENCODERS: dict[str, Callable[[EncoderSpec, Any], Fields]] = {
    "plain": encode_plain,
    "taskiq": encode_taskiq,
    "faststream": encode_faststream,
}


def encoder_for(spec: EncoderSpec) -> Callable[[Any], Fields]:
    """The one-argument function a producer calls to turn an event into XADD fields."""
    encode = ENCODERS[spec.format]
    return lambda event: encode(spec, event)


def _faststream_body(raw: bytes) -> bytes:
    """The JSON body inside FastStream's binary format v1 (or the raw bytes if not binary)."""
    if not raw.startswith(FASTSTREAM_MAGIC):
        return raw
    body_start = struct.unpack(">I", raw[len(FASTSTREAM_MAGIC) + 6:len(FASTSTREAM_MAGIC) + 10])[0]
    return raw[body_start:]


def _text_keys(fields: dict) -> dict[str, Any]:
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in fields.items()}


def decode_payload(spec: EncoderSpec, fields: dict) -> dict[str, Any]:
    """The user-named payload of a stream entry written by ``encoder_for(spec)`` (or by the
    library itself); what is not one of ours gives an empty dict."""
    fields = _text_keys(fields)
    try:
        if spec.format == "taskiq":
            return dict(json.loads(fields["data"]).get("kwargs") or {})
        if spec.format == "faststream":
            raw = fields["__data__"]
            return dict(json.loads(_faststream_body(raw if isinstance(raw, bytes) else raw.encode())))
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in fields.items()}
    except (KeyError, ValueError, TypeError, AttributeError):
        return {}


def decode_attributes(spec: EncoderSpec, fields: dict) -> dict[str, Any]:
    """Event attributes (event_id, key, version, etype) found in a stream entry."""
    payload_ = decode_payload(spec, fields)
    return {attr: payload_[name] for name, attr in spec.fields.items() if name in payload_}
