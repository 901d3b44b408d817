"""How a lost event was lost, and how a duplicated one ran twice: the field incidents' names.

The faults `group-loss` and `delete-consumer` record, in their `fault` start op, the events
whose entries vanished from Redis (`vanished_events`: the stream evicted or the node
restarted empty; `dropped_events`: a consumer's PEL dropped by XGROUP DELCONSUMER). A lost
event among them is reported under the anomaly kind that names how (`stream-lost`,
`pel-dropped`) instead of plain `lost`; it still counts in `lost`. A duplicated event whose
two runs overlapped in time (a job that outlived the claim idle time, fault `long-job`)
gets the overlap in its anomaly's detail. Pure functions over one run's ops, called by
chaos.checker.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

STREAM_LOST, PEL_DROPPED = "stream-lost", "pel-dropped"
DETAILS = {
    STREAM_LOST: "published, never handled: its stream entry vanished with the stream (evicted, or the "
                 "node restarted empty), group and PEL included",
    PEL_DROPPED: "published, never handled: its pending entry was dropped with its consumer (XGROUP "
                 "DELCONSUMER), so no claim or re-read of the PEL finds it again",
}
_FIELDS = (("vanished_events", STREAM_LOST), ("dropped_events", PEL_DROPPED))


class Vanished:
    """Event id -> how its entry vanished, from the fault ops seen so far."""

    def __init__(self) -> None:
        self.how: dict[str, str] = {}

    def note(self, value: Mapping) -> None:
        """A `fault` op's value; only start ops of the field faults carry event lists."""
        for field, kind in _FIELDS:
            for eid in value.get(field) or ():
                self.how.setdefault(str(eid), kind)

    def split(self, lost: Mapping[str | None, list[str]]) -> dict[str, dict[str | None, list[str]]]:
        """Lost events per key -> {kind: {key: events}}: those that vanished under their kind,
        the rest under ``lost``."""
        out: dict[str, dict[str | None, list[str]]] = defaultdict(lambda: defaultdict(list))
        for key, eids in lost.items():
            for eid in eids:
                out[self.how.get(eid, "lost")][key].append(eid)
        return out


def apply_runs(history: Iterable[dict], eids: set[str]) -> dict[str, list[tuple[str, float, float | None]]]:
    """Each event's apply runs (process, invoke time, completion time or None), in invoke order."""
    open_: dict[tuple[str, str], float] = {}
    runs: dict[str, list[tuple[str, float, float | None]]] = defaultdict(list)
    for op in history:
        if op.get("f") != "apply":
            continue
        eid = op.get("event_id")
        if eid not in eids:
            continue
        slot = (eid, op["process"])
        if op["type"] == "invoke":
            open_[slot] = op["time"]
        elif slot in open_:
            runs[eid].append((op["process"], open_.pop(slot), op["time"]))
    for (eid, process), began in open_.items():
        runs[eid].append((process, began, None))
    for eid in runs:
        runs[eid].sort(key=lambda r: r[1])
    return runs


def overlaps(history: Iterable[dict], eids: Iterable[str]) -> dict[str, str]:
    """For each duplicated event whose runs overlapped: a text with both runs and the overlap
    (ms, relative to the history's first op)."""
    wanted = set(eids)
    if not wanted:
        return {}
    origin = next(iter(history), {"time": 0.0})["time"]   # (a re-readable history: a list, a HistorySource)
    out: dict[str, str] = {}
    for eid, runs in apply_runs(history, wanted).items():
        for i, (p1, a1, b1) in enumerate(runs):
            for p2, a2, b2 in runs[i + 1:]:
                end1 = b1 if b1 is not None else float("inf")
                if p1 == p2 or a2 >= end1:
                    continue
                both = min(end1, b2 if b2 is not None else float("inf")) - a2
                overlap = "until the end" if both == float("inf") else f"{both * 1000:.0f} ms"
                out[eid] = (f"ran twice at once: {p1} {_ms(a1, origin)}-{_ms(b1, origin)} and {p2} "
                            f"{_ms(a2, origin)}-{_ms(b2, origin)}, overlap {overlap}")
                break
            if eid in out:
                break
    return out


def _ms(t: float | None, origin: float) -> str:
    return "?" if t is None else f"{(t - origin) * 1000:.0f} ms"
