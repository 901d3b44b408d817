"""Applies of unknown outcome: what the checker can prove they did (docs/checker.md,
"Unknown-outcome applies"). An `apply info` (a COMMIT whose reply was lost) or an apply
invoke its killed process never completed may or may not have committed; the inbox, the
projection counter and the final row can prove which, and nothing else is counted.
Part of chaos.checker: it works on the checker's per-event records (`_Event`, a view of a row of
chaos.checkstore's columns: key, version, etype, applied, handled_at, handle(), unknown) and each
key's known writes."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unknown:
    """An apply whose outcome is unknown: `apply info`, or an invoke its killed process never
    completed. `at` is the info op's time (the invoke's for a dangling one); `recovered`
    whether it followed a redelivery after a fault started."""

    at: float
    recovered: bool


class Unknowns:
    """An event's applies of unknown outcome and what the checker could prove about them."""

    __slots__ = ("applies", "proven", "indeterminate")

    def __init__(self) -> None:
        self.applies: list[Unknown] = []
        self.proven = False         # an inbox `duplicate` proved that one of them committed
        self.indeterminate = False  # not handled, and one of them may have handled it

    def candidates(self) -> int:
        """How many of them may have committed (an inbox commits an event once)."""
        return 1 if self.proven else len(self.applies)


def proves_commit(op: dict) -> bool:
    """A `duplicate` from a marker that commits with the effect (the PostgreSQL inbox row,
    `value.inbox`) proves an earlier apply of the event committed; a Redis SET NX marker
    (`value.dedupe`) does not, it is set before the effect is written."""
    value = op.get("value")
    return isinstance(value, dict) and value.get("inbox") is not None


ALL_LANDED, NONE_LANDED = "all", "none"


def resolve_unknown_applies(events: Any, writes_by_key: dict[str, list], final: Any) -> None:
    """Decide what the unknown-outcome applies did where the inbox, the projection or the final
    row proves it; the rest leave their event indeterminate (docs/checker.md, "Unknown-outcome
    applies"). Runs after order_writes: landed unknown writes take no part in `reordered`."""
    by_key: dict[str | None, list[Any]] = defaultdict(list)
    for ev in events.with_unknown():
        by_key[ev.key].append(ev)
    if not by_key:
        return
    # (the counters and rows of these keys only: the projection may be read a page at a time)
    projection = {str(k): v for k, v in final.projection.items() if str(k) in by_key}
    rows = {str(k): v for k, v in final.rows.items() if str(k) in by_key}
    for key, evs in by_key.items():
        writes = writes_by_key.get(key, [])
        landed = _projection_says(writes, evs, projection.get(key))
        for ev in evs:
            _resolve_event(ev, landed, rows.get(key), writes)


def _projection_says(writes: list, evs: list[Any], counter: Any) -> str | None:
    """`all` when the projection counter exceeds the known writes by the number of unknown
    applies that could have committed, `none` when it equals them, else None (no proof)."""
    if counter is None:
        return None
    landed = int(counter) - len(writes)
    candidates = sum(ev.unknown.candidates() for ev in evs)
    if landed == candidates:
        return ALL_LANDED
    if landed == 0:
        return NONE_LANDED
    return None


def _resolve_event(ev: Any, landed: str | None, row: dict | None, writes: list) -> None:
    """Landed (applied, handled), committed without a known effect (handled), proven rolled
    back (nothing: lost if gone), or none of these (indeterminate unless handled otherwise)."""
    unknown = ev.unknown
    first = min(unknown.applies, key=lambda u: u.at)
    if landed == ALL_LANDED:
        ev.applied += unknown.candidates()
        ev.handle(first.at, first.recovered)
    elif landed is None and _row_written_by(ev, row, writes):
        ev.applied += 1
        ev.handle(first.at, first.recovered)
    elif unknown.proven:
        ev.handle(first.at, first.recovered)  # committed; its effect unknown (none: a CAS stale)
    elif ev.handled_at is None and not (landed == NONE_LANDED and _commit_would_write(ev, first.at, writes)):
        unknown.indeterminate = True


def _row_written_by(ev: Any, row: dict | None, writes: list) -> bool:
    """The final row holds this event's state and no known write of its version exists, so
    one of its unknown applies wrote it."""
    if row is None or ev.version is None or ev.applied:
        return False
    if row.get("version") != ev.version or row.get("status") != ev.etype:
        return False
    return all(w[1] != ev.version for w in writes)


def _commit_would_write(ev: Any, at: float, writes: list) -> bool:
    """Whether a commit at `at` would have changed the row (and its projection) under any
    guard: no known write before it had a version at or above the event's."""
    before = [w[1] for w in writes if w[0] < at]
    if ev.version is None:
        return not before
    try:
        return all(v is None or v < ev.version for v in before)
    except TypeError:
        return False
