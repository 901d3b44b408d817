"""What a run's history says beyond the checker's counts: work metrics, the faults'
phases, and notes for a person (a fault that fired after the workload ended)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from chaos.checker import HANDLED_EFFECTS, NOTED
from chaos.results import Phase


class WorkNotes:
    """Events handled, the first publish and the last effect, the last publish and the fault
    ops, folded op by op while the checker reads the history (one pass over 10^6 events'
    ops, not one more). `observe(ops)` feeds it and gives the ops on; given the checker's `events`
    (chaos.checker.check_run's observe), the events handled are counted from the checker's records
    (their NOTED flag) instead of a set of every handled event's id (10^6 ids: ~100 MB)."""

    def __init__(self) -> None:
        self.handled: set[str] = set()
        self.handled_count: int | None = None   # (from the checker's records: then `handled` stays empty)
        self.first_publish: float | None = None
        self.last_publish: float | None = None
        self.last_effect: float | None = None
        self.faults: list[dict] = []

    def observe(self, ops: Iterable[dict], events: Mapping[str, Any] | None = None) -> Iterator[dict]:
        self.__init__()   # (a pass done again starts over)
        yield from self.feed(ops, counted=events is not None)
        self.finish(events)

    def feed(self, ops: Iterable[dict], counted: bool = False) -> Iterator[dict]:
        """`observe`'s fold without its start and end: consecutive pieces of one pass may be fed
        (chaos.orchestrator.livefold folds the history while it is written), then `finish`.
        `counted`: the checker's records will count the events handled (see `finish`)."""
        handled, faults = self.handled, self.faults
        first, last_publish, last_effect = self.first_publish, self.last_publish, self.last_effect
        for op in ops:
            f = op["f"]
            if f == "apply":
                if op["type"] == "ok" and op.get("effect") in HANDLED_EFFECTS:
                    eid = op.get("event_id")
                    if not counted or eid is None:   # (the checker keeps no record of an op without id)
                        handled.add(eid)
                    last_effect = op["time"]
            elif f == "publish":
                last_publish = op["time"]
                if first is None:
                    first = last_publish
            elif f == "fault":
                faults.append(op)
            yield op
        self.first_publish, self.last_publish, self.last_effect = first, last_publish, last_effect

    def finish(self, events: Mapping[str, Any] | None = None) -> None:
        """The end of a pass fed with `counted`: the events handled counted from `events`."""
        if events is not None:
            self.handled_count = len(self.handled) + events.count(NOTED)

    def work(self) -> tuple[int, float | None]:
        """Events handled, and seconds from the first publish to the last effect."""
        first, last = self.first_publish, self.last_effect
        handled = len(self.handled) if self.handled_count is None else self.handled_count
        return handled, (last - first) if first is not None and last is not None else None


def work_metrics(history: Iterable[dict]) -> tuple[int, float | None, list[dict]]:
    """Events handled, seconds from the first publish to the last effect, and the fault ops."""
    notes = WorkNotes()
    for _ in notes.observe(history):
        pass
    return (*notes.work(), notes.faults)


def fault_phases(history: list[dict], run: int) -> list[Phase]:
    """`fault:<name>` phases from the nemesis's fault ops: from a fault's start op to its stop
    op (a fault with no stop, such as a SIGKILL, lasts an instant); a fault started twice
    (nemesis steps) gives one phase per start."""
    phases: list[Phase] = []
    open_at: dict[str, float] = {}
    for op in history:
        if op["f"] != "fault":
            continue
        value = op.get("value")
        if not isinstance(value, dict) or not value.get("name"):
            continue
        name, step = value["name"], value.get("phase")
        if step == "start":
            if name in open_at:
                phases.append(Phase(run, f"fault:{name}", open_at[name], open_at[name]))
            open_at[name] = op["time"]
        elif step == "stop" and name in open_at:
            phases.append(Phase(run, f"fault:{name}", open_at.pop(name), op["time"]))
    phases += [Phase(run, f"fault:{name}", t, t) for name, t in open_at.items()]
    return phases


def late_fault_notes(history: Iterable[dict], t0: float, faults: list[dict] | None = None,
                     last_publish: float | None = None) -> list[str]:
    """A sentence for each fault that started when the workload had nothing left in flight:
    every publish done and every published event acked (or dead-lettered) before it. Such a
    fault tests nothing, and a silent `valid` would say the strategy survived it. (`faults`:
    the history's fault ops, and `last_publish` the time of its last publish, when already
    picked out: then a history whose last publish came after every fault start is not read.)"""
    if faults is None:
        faults = [op for op in history if op.get("f") == "fault"]
    starts = [op["time"] for op in faults if isinstance(op.get("value"), dict) and op["value"].get("phase") == "start"]
    if not starts:
        return []
    # (a publish after the latest start means none was late, the usual case)
    if last_publish is None:
        last_publish = max((op["time"] for op in history if op.get("f") == "publish"), default=None)
    if last_publish is None or last_publish > max(starts):
        return []
    unsettled: set[Any] = set()
    settled: set[Any] = set()
    open_applies = 0
    notes = []
    for op in history:  # sorted by time (read_history)
        f, kind, value = op.get("f"), op.get("type"), op.get("value")
        if f == "publish" and kind == "ok" and op.get("event_id") not in settled:
            unsettled.add(op.get("event_id"))
        elif f in ("ack", "dlq") and kind == "ok":
            unsettled.discard(op.get("event_id"))
            settled.add(op.get("event_id"))
        elif f == "apply":
            open_applies = max(0, open_applies + (1 if kind == "invoke" else -1))
        elif (f == "fault" and isinstance(value, dict) and value.get("phase") == "start"
              and op["time"] > last_publish and not unsettled and not open_applies):
            notes.append(f"{value.get('name')} fired after the workload ended (at {op['time'] - t0:.1f} s; "
                         f"last publish at {last_publish - t0:.1f} s): raise the workload's size or fire earlier")
    return notes
