"""The lab-notebook trace of a run (`run --trace`): one readable line per meaningful op.

A rendering of a history (chaos/history.py), beside it at the bottom of the house: the
orchestrator, the black-box runner and the reports all print it, none of them owns it.

    t=   2 ms  C1 got 17925..-0 created (v=1)
    t= 816 ms  C1 wrote status=created -> UPDATE 1
"""
from __future__ import annotations

from typing import Any, Callable, Iterable


def short_id(entry_id: str | None) -> str:
    if not entry_id:
        return "?"
    ms, _, seq = entry_id.partition("-")
    return f"..{ms[-5:]}-{seq}" if len(ms) > 5 else entry_id


def _ev(op: dict) -> str:
    return f"{op.get('etype', '?')} (v={op.get('version', '?')})"


def _publish(op: dict) -> str | None:
    attempt = (op.get("value") or {}).get("attempt", 1) if isinstance(op.get("value"), dict) else 1
    if op["type"] == "invoke":
        return None
    if op["type"] == "ok":
        extra = ""
        value = op.get("value") or {}
        if isinstance(value, dict) and "replicas" in value:
            extra = f", WAIT -> {value['replicas']} replica(s)"
        return f"published {op.get('event_id')} {_ev(op)} -> {short_id(op.get('entry_id'))} (attempt {attempt}{extra})"
    error = op.get("value", {}).get("error", "") if isinstance(op.get("value"), dict) else op.get("value")
    outcome = "FAILED" if op["type"] == "fail" else "outcome UNKNOWN"
    return f"publish of {op.get('event_id')} {_ev(op)} {outcome} (attempt {attempt}): {error}"


def _apply(op: dict) -> str | None:
    if op["type"] == "invoke":
        return None
    if op["type"] == "fail":
        return f"apply of {op.get('event_id')} FAILED: {op.get('value')}"
    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    effect = op.get("effect")
    if effect == "duplicate":
        return f"skipped {op.get('event_id')} {_ev(op)}: already seen"
    if effect == "stale" or op.get("rows") == 0:
        return f"CAS rejected {op.get('event_id')} {_ev(op)} -> UPDATE 0 (stale)"
    retries = f" after {value['retries']} retr{'y' if value['retries'] == 1 else 'ies'}" if value.get("retries") else ""
    return f"wrote status={value.get('status', op.get('etype'))} -> UPDATE {op.get('rows')}{retries}"


def _lock(op: dict) -> str | None:
    if op["type"] == "invoke":
        return f"wants lock {op.get('key')}"
    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    return f"locked {op.get('key')} ({value.get('tries', 1)} tries)"


def _unlock(op: dict) -> str:
    released = op.get("value")
    note = "" if released else " (lock had expired: not ours any more)"
    return f"released lock {op.get('key')} -> {released}{note}"


def _log(op: dict) -> str | None:
    value = op.get("value")
    if not isinstance(value, dict):
        return None
    if "exited" in value:
        return f"{value['exited']} exited: {value['how']}{'' if value.get('expected') else ' (UNEXPECTED)'}"
    if "phase" in value and op["process"] == "orchestrator":
        return f"phase {value['phase']}"
    if "barrier" in value:
        return f"barrier {value['phase']}: {value['barrier']}"
    if value.get("link") == "broken":
        return f"link broken: {value.get('error')}"
    return None


_FORMATS: dict[str, Callable[[dict], str | None]] = {
    "publish": _publish,
    "deliver": lambda op: (f"got {short_id(op.get('entry_id'))} {_ev(op)}"
                           + ("" if op.get("via") in (None, "read") else
                              f" via {op['via']} (delivery {op.get('delivery_count')})")) if op["type"] == "ok" else None,
    "apply": _apply,
    "ack": lambda op: f"acked {short_id(op.get('entry_id'))}" + (
        f" ({op['value']})" if isinstance(op.get("value"), str) else ""),
    "dlq": lambda op: f"moved {short_id(op.get('entry_id'))} to the DLQ after {op.get('delivery_count')} deliveries",
    "lock": _lock,
    "unlock": _unlock,
    "retry": lambda op: f"serialization failure on {op.get('event_id')}, retry {(op.get('value') or {}).get('attempt')}",
    "failpoint": lambda op: f"failpoint {(op.get('value') or {}).get('name')} -> {(op.get('value') or {}).get('action')}",
    "fault": lambda op: f"fault {(op.get('value') or {}).get('name', '')} {(op.get('value') or {}).get('phase', '')} "
                        + " ".join(f"{k}={v}" for k, v in (op.get("value") or {}).items() if k not in ("name", "phase")),
    "log": _log,
}


def trace_lines(history: Iterable[dict], origin: float | None = None) -> list[str]:
    """The readable lines of a merged history; times in ms from `origin` (default: first op)."""
    ops = list(history)
    if not ops:
        return []
    origin = ops[0]["time"] if origin is None else origin
    lines = []
    for op in ops:
        fmt: Callable[[dict], Any] | None = _FORMATS.get(op["f"])
        text = fmt(op) if fmt else None
        if text:
            lines.append(f"t={(op['time'] - origin) * 1000:6.0f} ms  {op['process']:<10} {text.rstrip()}")
    return lines
