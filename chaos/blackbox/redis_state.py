"""Redis state at the end of a black-box run: what is still in the stream, pending, undelivered.

Entries are tied to events by decoding them with the run's encoder (the user's worker
writes no history, so the entry's own payload is the only link to an event id).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos.encoders import EncoderSpec, decode_attributes


@dataclass
class StreamState:
    """The stream and its group as the checker's FinalState wants them."""

    stream_entries: list[dict] = field(default_factory=list)
    pending: list[dict] = field(default_factory=list)
    undelivered: list[dict] = field(default_factory=list)
    dlq: list[dict] = field(default_factory=list)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def event_id_of(attrs: dict, by_key_version: dict[tuple[str, int], str]) -> str | None:
    """The event id an entry names, directly or through its (key, version)."""
    if attrs.get("event_id"):
        return str(attrs["event_id"])
    try:
        return by_key_version.get((str(attrs["key"]), int(attrs["version"])))
    except (KeyError, TypeError, ValueError):
        return None


def read_stream_state(r: Any, stream: str, group: str, encoder: EncoderSpec,
                      by_key_version: dict[tuple[str, int], str], dlq_stream: str | None = None) -> StreamState:
    """Read entries, the group's PEL and its undelivered tail from a client ``r`` (any
    decode setting; the primary after a failover)."""
    state = StreamState()
    ids: dict[str, str | None] = {}
    for entry_id, fields in r.xrange(stream):
        eid = event_id_of(decode_attributes(encoder, fields), by_key_version)
        ids[_text(entry_id)] = eid
        state.stream_entries.append({"entry_id": _text(entry_id), "stream": stream, "event_id": eid})
    groups = {_text(g["name"]): g for g in r.xinfo_groups(stream)} if r.exists(stream) else {}
    info = groups.get(group)
    if info is not None:
        for p in r.xpending_range(stream, group, min="-", max="+", count=1_000_000):
            entry_id = _text(p["message_id"])
            state.pending.append({"entry_id": entry_id, "stream": stream, "event_id": ids.get(entry_id),
                                  "consumer": _text(p["consumer"]), "delivery_count": int(p["times_delivered"])})
        last = _text(info["last-delivered-id"])
        state.undelivered = [dict(e) for e in state.stream_entries if _after(e["entry_id"], last)]
    else:
        state.undelivered = [dict(e) for e in state.stream_entries]
    if dlq_stream and r.exists(dlq_stream):
        for entry_id, fields in r.xrange(dlq_stream):
            eid = event_id_of(decode_attributes(encoder, fields), by_key_version)
            state.dlq.append({"entry_id": _text(entry_id), "event_id": eid})
    return state


def outstanding(r: Any, stream: str, group: str) -> int:
    """len(pending) + len(undelivered) of `read_stream_state`, without reading or decoding the
    payloads: the PEL's size and the entries after the group's last-delivered id."""
    if not r.exists(stream):
        return 0
    info = {_text(g["name"]): g for g in r.xinfo_groups(stream)}.get(group)
    if info is None:
        return int(r.xlen(stream))
    last = _text(info["last-delivered-id"])
    return int(info["pending"]) + len(r.xrange(stream, min=f"({last}", max="+"))


def busy_consumers(r: Any, stream: str, group: str, names: list[str], quiet_ms: int) -> list[str]:
    """The consumers among `names` that have not asked the group for work for `quiet_ms` and
    cannot all be blocked in XREADGROUP now: each of them may hold entries it read (and, an
    ack-first consumer, acknowledged) and has not written yet. A consumer the group does not
    know by one of `names` (a library naming its own) is passed over.

    XINFO CONSUMERS' `idle` is the time since the consumer's last read or claim. A consumer
    blocked in XREADGROUP is waiting for work, not holding any, and its `idle` grows too (with
    BLOCK 0 for good), so the blocked clients (CLIENT LIST: flag b, command xreadgroup) are
    counted first against the consumers that did come back, and only what is left of them
    against the lagging ones: with fewer left than lagging consumers, one of those is busy."""
    idle = {_text(c["name"]): int(c["idle"]) for c in r.xinfo_consumers(stream, group)}
    lagging = [n for n in names if idle.get(n, -1) > quiet_ms]
    if not lagging:
        return []
    blocked = sum(1 for c in r.client_list()
                  if "b" in _text(c.get("flags", "")) and _text(c.get("cmd", "")).startswith("xreadgroup"))
    came_back = sum(1 for n in names if 0 <= idle.get(n, -1) <= quiet_ms)
    return lagging if len(lagging) > max(0, blocked - came_back) else []


def _after(entry_id: str, last: str) -> bool:
    a, b = (tuple(int(x) for x in i.split("-")) for i in (entry_id, last))
    return a > b
