"""What a fault must have done to the workload for its run to have tested anything.

A fault declares one effect kind (`Fault.effect`, one of `EFFECTS`); after the run the
orchestrator asks `missing(kind, name, history)`, which reads the run's history (pure, no
I/O) and returns why the effect is missing, or None when the history shows it. A run whose
fault missed the workload is `unknown` (exit 2) with that reason: a kill after the last
event was acked, a blip that no publish met, a partition no op crossed, a nemesis whose
windows all fell between ops test nothing, and `valid` would say the strategy survived them.

The fault's own `fault` ops (value `name` = the fault's name, `phase` start/stop) place it
in time; a composite fault (nemesis) is placed by the windows of the faults it ran between
its own start and stop. A fault that acts some time after its start (a failover that holds
replication first) marks the moment it struck with a `fault` op carrying `step: kill` or
`struck: true`; work in flight is judged there.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

DIED_MID_WORK = "died-mid-work"
PUBLISH_FAILED = "publish-failed"
LINK_FAILED = "link-failed"
WINDOW_HIT = "window-hit"
STOPPED_MID_WORK = "stopped-mid-work"
STRUCK_UNSETTLED = "struck-unsettled"
CLAIMED_WHILE_RUNNING = "claimed-while-running"
FAILPOINT_FIRED = "failpoint-fired"
TOOK_BACK = "took-back"
_IN_FLIGHT = ("the workload had work in flight (a publish still to come, an event published and not yet "
              "acked, delivered and not yet applied, or an apply under way)")
EFFECTS = {
    DIED_MID_WORK: f"when it struck (a process or the primary killed, a failover, the group or a consumer "
                   f"deleted) {_IN_FLIGHT}",
    STOPPED_MID_WORK: f"when it stopped the process {_IN_FLIGHT}",
    PUBLISH_FAILED: "at least one publish got `fail` or `info` after the fault started",
    LINK_FAILED: "at least one op on the cut link failed (an op `fail`/`info`, a `log` op of a broken link, "
                 "by a process the fault names in its start op's `worker`/`workers`, any process for a "
                 "shared link) during one of the fault's windows, or within LINK_GRACE_S of its end",
    WINDOW_HIT: "at least one op of the workload was in flight during one of the fault's windows",
    STRUCK_UNSETTLED: "its start op records at least one entry it removed or dropped that was not yet acked "
                      "(`unsettled`: pending in a group or not yet delivered)",
    CLAIMED_WHILE_RUNNING: "an entry was claimed (a `deliver` via claim) by another consumer while the first "
                           "still had it in hand (delivered to it and neither acked nor given up by it), "
                           "during one of the fault's windows; for a fault that names its worker, one that "
                           "worker held; for one that lists `failpoints`, one its holder reached them with",
    FAILPOINT_FIRED: "a worker reached one of the failpoints its start op lists (`failpoints`: name -> action) "
                     "and the failpoint acted (a `failpoint` op)",
    TOOK_BACK: "its `step: kill` op (sentinel-failover: its `struck: true` op) records, read on the old primary and the held replica just before the kill, "
               "each kind of work its `until` names for the failover to take back (`took_back`: `reread` = an "
               "entry the replica holds that a consumer read after the replica's last byte, `unacked` = one it "
               "acked after it, `unread` = an acked entry the replica never got that no consumer had read)",
}
WORK_OPS = frozenset({"publish", "deliver", "apply", "ack"})
FAILED = frozenset({"fail", "info"})
LINK_GRACE_S = 5.0


def missing(kind: str, name: str, history: list[dict]) -> str | None:
    """Why fault `name` did not have effect `kind` in this history (time-ordered ops), or None."""
    if kind not in EFFECTS:
        raise ValueError(f"fault {name!r} declares effect {kind!r}; effects are {', '.join(EFFECTS)}")
    windows = _windows(name, history)
    if not windows:
        return f"fault {name} never started (no `fault` op with phase start): it tested nothing"
    if kind == LINK_FAILED:
        met = _link_failed(windows, history, _struck(name, history))
    elif kind == CLAIMED_WHILE_RUNNING:
        met = _claimed_while_running(name, windows, history, _struck(name, history))
    elif kind in (DIED_MID_WORK, STOPPED_MID_WORK):
        met = _died_mid_work(_strike(name, history, windows[0][0]), history)
    elif kind == STRUCK_UNSETTLED:
        met = any(_count(v.get("unsettled")) for v in _starts(name, history))
    elif kind == FAILPOINT_FIRED:
        met = _failpoint_fired(name, history)
    elif kind == TOOK_BACK:
        met = _took_back(name, history)
    else:
        met = {PUBLISH_FAILED: _publish_failed, WINDOW_HIT: _window_hit}[kind](windows, history)
    if met:
        return None
    return f"fault {name} missed the workload: expected {EFFECTS[kind]}; the history shows none"


def _value(op: dict) -> dict:
    value = op.get("value")
    return value if isinstance(value, dict) else {}


def _windows(name: str, history: Iterable[dict]) -> list[tuple[float, float]]:
    """(start, stop) of each window of the fault; a composite's are the windows it ran."""
    own: list[tuple[float, float]] = []
    inner: list[tuple[float, float]] = []
    open_own: float | None = None
    open_inner: dict[str, float] = {}
    for op in history:
        if op.get("f") != "fault":
            continue
        value = _value(op)
        who, phase, at = value.get("name"), value.get("phase"), op["time"]
        if who == name:
            if phase == "start":
                open_own = at
            elif phase == "stop" and open_own is not None:
                own.append((open_own, at))
                open_own = None
        elif open_own is not None and who:
            if phase == "start":
                open_inner[who] = at
            elif phase == "stop" and who in open_inner:
                inner.append((open_inner.pop(who), at))
    end = history[-1]["time"] if history else 0.0
    if open_own is not None:
        own.append((open_own, end))   # never stopped (a kill, a fault still on at the end)
    inner += [(start, end) for start in open_inner.values()]
    return sorted(inner) if inner else own


def _starts(name: str, history: Iterable[dict]) -> list[dict]:
    return [_value(op) for op in history
            if op.get("f") == "fault" and _value(op).get("name") == name and _value(op).get("phase") == "start"]


def _count(value: Any) -> int:
    """An `unsettled` record: a number, or ids (a list, or lists per stream)."""
    if isinstance(value, dict):
        return sum(_count(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return len(value)
    return int(value or 0)


def _strike(name: str, history: Iterable[dict], start: float) -> float:
    """When the fault struck: its first op marked `step: kill` or `struck: true`, else its start."""
    for op in history:
        value = _value(op)
        if op.get("f") == "fault" and value.get("name") == name and (value.get("step") == "kill" or value.get("struck")):
            return op["time"]
    return start


def _died_mid_work(killed_at: float, history: list[dict]) -> bool:
    """At the kill, an event was published and not acked, delivered and not yet applied, an
    apply was under way, or a publish was still to come."""
    unsettled: set[Any] = set()
    in_hand: set[Any] = set()
    open_applies = 0
    for op in history:
        f, kind = op.get("f"), op.get("type")
        if op["time"] > killed_at:
            if unsettled or in_hand or open_applies or f == "publish":
                return True
            continue
        eid = op.get("event_id")
        if f == "publish" and kind == "ok":
            unsettled.add(eid)
        elif f in ("ack", "dlq") and kind == "ok":
            unsettled.discard(eid)
        elif f == "deliver" and kind == "ok":
            in_hand.add(eid)
        elif f == "apply":
            open_applies = max(0, open_applies + (1 if kind == "invoke" else -1))
            if kind != "invoke":
                in_hand.discard(eid)
    return bool(unsettled or in_hand or open_applies)


def _publish_failed(windows: list[tuple[float, float]], history: list[dict]) -> bool:
    start = windows[0][0]
    return any(op.get("f") == "publish" and op.get("type") in FAILED and op["time"] >= start for op in history)


def _struck(name: str, history: Iterable[dict]) -> set[str] | None:
    """The processes the fault's start ops name (`worker`, `workers`); None: every process."""
    named: set[str] = set()
    for op in history:
        value = _value(op)
        if op.get("f") == "fault" and value.get("name") == name and value.get("phase") == "start":
            workers = value.get("workers") or ([value["worker"]] if value.get("worker") else [])
            named.update(str(w) for w in workers)
    return named or None


def _link_failed(windows: list[tuple[float, float]], history: list[dict], struck: set[str] | None) -> bool:
    for op in history:
        if struck is not None and str(op.get("process", "")).split("#")[0] not in struck:
            continue   # (a restarted worker writes as C1#2)
        failed = ((op.get("f") in WORK_OPS and op.get("type") in FAILED)
                  or (op.get("f") == "log" and (_value(op).get("link") == "broken"
                                                or _value(op).get("connect") == "failed")))
        if failed and any(start <= op["time"] <= stop + LINK_GRACE_S for start, stop in windows):
            return True
    return False


def _window_hit(windows: list[tuple[float, float]], history: list[dict]) -> bool:
    """An op of the workload inside a window, or a publish/apply invoked before a window
    started and completed (or never) after it started."""
    work = [op for op in history if op.get("f") in WORK_OPS]
    times = [op["time"] for op in work]
    for start, stop in windows:
        i = bisect.bisect_left(times, start)
        if i < len(times) and times[i] <= stop:
            return True
    spans: dict[tuple[Any, Any, Any], float] = {}
    for op in work:
        if op["f"] not in ("publish", "apply"):
            continue
        k = (op.get("process"), op["f"], op.get("event_id"))
        if op.get("type") == "invoke":
            spans[k] = op["time"]
        elif k in spans:
            invoked = spans.pop(k)
            if any(invoked < start <= op["time"] for start, _ in windows):
                return True
    return any(invoked < start for invoked in spans.values() for start, _ in windows)


def _base(process: Any) -> str:
    return str(process or "").split("#")[0]


def _claimed_while_running(name: str, windows: list[tuple[float, float]], history: list[dict],
                           struck: set[str] | None) -> bool:
    """A `deliver ok via=claim` of an event by one consumer, inside a window, while another
    consumer (one the fault names, if it names any) holds the event: delivered to it, not
    yet acked, moved to the DLQ or given up (an apply that failed) by it. A fault whose start
    op lists `failpoints` asks that the holder reached one of them with that event (the long
    job itself, not any entry that waited past the min-idle time)."""
    held: dict[Any, set[str]] = {}     # event -> consumers that hold it
    named = None if struck is None else {_base(p) for p in struck}
    points = _failpoints(name, history)
    reached: set[tuple[str, Any]] = set()   # (consumer, event) that reached one of the fault's failpoints
    for op in history:
        f, kind, eid, who = op.get("f"), op.get("type"), op.get("event_id"), _base(op.get("process"))
        if f == "deliver" and kind == "ok":
            holders = held.setdefault(eid, set())
            if op.get("via") == "claim" and any(start <= op["time"] <= stop for start, stop in windows):
                if any(p != who and (named is None or p in named) and (not points or (p, eid) in reached)
                       for p in holders):
                    return True
            holders.add(who)
        elif f == "failpoint" and points.get(_value(op).get("name")) == _value(op).get("action"):
            reached.add((who, eid))
        elif (f in ("ack", "dlq") and kind != "invoke") or (f == "apply" and kind in FAILED):
            held.get(eid, set()).discard(who)
    return False


def _failpoints(name: str, history: list[dict]) -> dict[str, str]:
    """The failpoints (name -> action) the fault's start ops list."""
    wanted: dict[str, str] = {}
    for value in _starts(name, history):
        wanted.update(value.get("failpoints") or {})
    return wanted


def _failpoint_fired(name: str, history: list[dict]) -> bool:
    wanted = _failpoints(name, history)
    for op in history:
        if op.get("f") == "failpoint":
            point = _value(op)
            if point.get("name") in wanted and point.get("action") == wanted[point["name"]]:
                return True
    return False


def took_back_met(until: Iterable[str], took: dict | None) -> bool:
    """Whether a failover's `took_back` figures (faults.failover_steps.took_back: read, acked,
    unread) hold each kind `until` names (reread: read, unacked: acked, unread), at least one each."""
    if not took:
        return False
    have = {"reread": took.get("read", 0), "unacked": took.get("acked", 0), "unread": took.get("unread", 0)}
    return all(have.get(kind, 0) >= 1 for kind in until)


def _took_back(name: str, history: Iterable[dict]) -> bool:
    """The fault's kill op (sentinel-failover: its struck op) says the kind(s) its `until` named
    were there (faults.failover_steps)."""
    for op in history:
        value = _value(op)
        if op.get("f") == "fault" and value.get("name") == name and (value.get("step") == "kill" or value.get("struck")):
            return bool(value.get("until")) and took_back_met(value["until"], value.get("took_back"))
    return False
