"""The final Redis state of a black-box run, tied to events by decoding the library's format."""
from __future__ import annotations

from chaos.encoders import EncoderSpec, encoder_for
from chaos.blackbox.redis_state import outstanding, read_stream_state
from chaos.blackbox.session import raw_redis
from chaos.events import Event

EVENTS = [Event(f"e{k}-1", str(k), "created", 1) for k in range(42, 46)]
BY_KV = {(e.key, e.version): e.event_id for e in EVENTS}


def test_pending_undelivered_and_dlq_of_faststream_entries(cluster) -> None:
    spec = EncoderSpec(format="faststream")
    encode = encoder_for(spec)
    with raw_redis(cluster) as r:
        r.xgroup_create("orders", "workers", id="0", mkstream=True)
        ids = [r.xadd("orders", encode(e)) for e in EVENTS]
        r.xreadgroup("workers", "C1", {"orders": ">"}, count=2)   # 42, 43 delivered to C1
        r.xack("orders", "workers", ids[0])                       # 42 done; 43 pending; 44, 45 never read
        r.xadd("orders:dlq", encode(EVENTS[1]))
        state = read_stream_state(r, "orders", "workers", spec, BY_KV, dlq_stream="orders:dlq")
    assert [e["event_id"] for e in state.stream_entries] == [e.event_id for e in EVENTS]
    assert [(p["event_id"], p["consumer"], p["delivery_count"]) for p in state.pending] == [("e43-1", "C1", 1)]
    assert [e["event_id"] for e in state.undelivered] == ["e44-1", "e45-1"]
    assert [e["event_id"] for e in state.dlq] == ["e43-1"]
    with raw_redis(cluster) as r:   # the drain's count, without the payloads: the same entries
        assert outstanding(r, "orders", "workers") == len(state.pending) + len(state.undelivered) == 3
        r.xreadgroup("workers", "C2", {"orders": ">"})                 # 44, 45 delivered, pending
        r.xack("orders", "workers", ids[1], ids[2])                    # 43, 44 done
        assert outstanding(r, "orders", "workers") == 1
        assert outstanding(r, "no-such-stream", "workers") == 0


def test_entries_without_event_id_are_tied_by_key_and_version(cluster) -> None:
    spec = EncoderSpec(format="plain", fields={"order_id": "key", "version": "version"})
    with raw_redis(cluster) as r:
        r.xadd("orders", encoder_for(spec)(EVENTS[2]))
        r.xadd("orders", {"junk": "x"})
        state = read_stream_state(r, "orders", "workers", spec, BY_KV)
    assert [e["event_id"] for e in state.stream_entries] == ["e44-1", None]
    assert len(state.undelivered) == 2  # no group at all: nothing was ever delivered
    with raw_redis(cluster) as r:
        assert outstanding(r, "orders", "workers") == 2
