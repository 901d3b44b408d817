"""Encoders write what the library's own publisher writes: decoded here by the library itself."""
from __future__ import annotations

import pytest

from chaos.encoders import EncoderSpec, decode_attributes, encoder_for
from chaos.events import Event

EVENT = Event("e42-2", "42", "paid", 2)
FIELDS = {"order_id": "key", "status": "etype", "version": "version", "event_id": "event_id"}


def _as_redis_returns(fields: dict) -> dict[bytes, bytes]:
    return {k.encode(): v if isinstance(v, bytes) else v.encode() for k, v in fields.items()}


def test_plain_fields_are_text() -> None:
    fields = encoder_for(EncoderSpec(format="plain", fields=FIELDS))(EVENT)
    assert fields == {"order_id": "42", "status": "paid", "version": "2", "event_id": "e42-2"}


def test_taskiq_message_is_what_taskiq_parses() -> None:
    formatter = pytest.importorskip("taskiq.formatters.json_formatter").JSONFormatter()
    spec = EncoderSpec(format="taskiq", fields=FIELDS, task_name="examples.taskiq_orders:apply_order_event")
    fields = encoder_for(spec)(EVENT)
    assert set(fields) == {"data"}  # RedisStreamBroker.kick writes one field "data"
    message = formatter.loads(fields["data"])
    assert message.task_name == "examples.taskiq_orders:apply_order_event"
    assert message.kwargs == {"order_id": "42", "status": "paid", "version": 2, "event_id": "e42-2"}
    assert message.task_id == formatter.loads(encoder_for(spec)(EVENT)["data"]).task_id  # replays


def test_faststream_binary_is_what_faststream_parses() -> None:
    parser = pytest.importorskip("faststream.redis.parser")
    fields = encoder_for(EncoderSpec(format="faststream", fields=FIELDS))(EVENT)
    assert set(fields) == {"__data__"}
    body, headers = parser.BinaryMessageFormatV1.parse(fields["__data__"])
    assert body == b'{"order_id":"42","status":"paid","version":2,"event_id":"e42-2"}'
    assert headers["content-type"] == "application/json" and headers["correlation_id"]


@pytest.mark.parametrize("fmt", ["plain", "taskiq", "faststream"])
def test_entries_decode_back_to_the_event(fmt: str) -> None:
    spec = EncoderSpec(format=fmt, fields=FIELDS, task_name="t:t")
    attrs = decode_attributes(spec, _as_redis_returns(encoder_for(spec)(EVENT)))
    assert attrs["event_id"] == "e42-2" and str(attrs["version"]) == "2" and attrs["key"] == "42"
    assert decode_attributes(spec, {b"something": b"else"}) == {}  # not one of ours: no attributes
