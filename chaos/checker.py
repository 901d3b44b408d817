"""Verdicts from one run's history and the final PostgreSQL/Redis state.

The checker is pure: ops and a `FinalState` in, a `RunResult` out; `summarize` sums runs
into a `CellResult` (one preset x fault cell). Events are identified by `event_id`, never
by stream entry id (a failover can hand an old entry id to a new event). The meaning of
every count and of the verdict is in docs/checker.md; the short version:

* valid   = nothing lost, no wrong final state (except keys whose last event still waits in
            Redis or the DLQ), no reordered write, nothing unexpected; duplicates,
            redeliveries, pending and DLQ entries and undecidable outcomes are counted, not judged
* invalid = any of those safety counts above zero (it outranks unknown, as in Jepsen)
* unknown = no safety violation seen, but the run cannot vouch for itself (a worker died
            unexpectedly, a fault did not heal, the drain timed out)

With `consumers_live` (the caller saw a live consumer, every fault healed, make no more
progress to the end of the drain), published events never handled and still waiting in Redis
are a liveness violation, `stopped-consuming`, and their keys' wrong final state is not unsettled.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from chaos.history import HistoryError, paused_gc
from chaos.results import (  # noqa: F401 - the records' old home: these names stay importable from here
    COUNT_NAMES, DUPLICATED, INVALID, LOST, MAX_ANOMALIES_PER_KIND, MAX_EXAMPLES, PROJECTION_DRIFT, REORDERED,
    SCHEMA_VERSION, STOPPED_CONSUMING, UNEXPECTED, UNHELD_EFFECT, UNKNOWN, VALID, VERDICT_PRIORITY,
    WRONG_FINAL_STATE, Anomaly, AnomalyLog, CellResult, Counts, FinalState, RunResult, merge_verdicts, summarize,
    violations)
from chaos.vanished import DETAILS as VANISHED_DETAILS
from chaos.vanished import Vanished, overlaps

HANDLED_EFFECTS = frozenset({"applied", "stale"})
DUPLICATE_EFFECT = "duplicate"
REDELIVERY_VIAS = frozenset({"claim", "pending"})
_ORDER = itemgetter(0)  # a write's (order, version, event_id, seq): when it took effect ...
_SEQ = itemgetter(3)    # ... and its key's commit-ordered write number, when the guard gave one

UNSETTLED_NOTE = "; its highest event is still pending, undelivered or in the DLQ (unsettled: not a violation)"
STOPPED_NOTE = "; its highest event waits in Redis and a live consumer never took it (stopped-consuming)"


class _Event:
    """What the history says about one event (slots: there may be 10^6 of them)."""

    __slots__ = ("key", "version", "etype", "ok", "info", "failed", "open", "deliveries", "applied",
                 "handled_at", "recovered", "first_entry", "entries", "dlq", "last_via", "last_count",
                 "apply_open", "invoked_at", "unknown")

    def __init__(self) -> None:
        self.key = self.version = self.etype = None
        self.ok = self.info = self.failed = self.recovered = self.dlq = False
        self.open = self.deliveries = self.applied = self.apply_open = 0
        self.handled_at: float | None = None
        self.first_entry: tuple[str | None, str] | None = None
        self.entries: dict[str | None, set[str]] | None = None  # only once a second entry shows up
        self.last_via: str | None = None
        self.last_count = 1
        self.invoked_at = 0.0  # the latest apply invoke (for one its process never completed)
        self.unknown: _Unknowns | None = None  # rare: kept off the slots every event pays for

    def learn(self, op: dict) -> None:
        if self.key is None and op.get("key") is not None:
            self.key = str(op["key"])
        if self.version is None:
            self.version = op.get("version")
        if self.etype is None:
            self.etype = op.get("etype")

    def add_entry(self, stream: str | None, entry_id: str | None) -> None:
        if entry_id is None:
            return
        first = self.first_entry
        if first is None:
            self.first_entry = (stream, entry_id)
            return
        if first[1] == entry_id and (first[0] == stream or stream is None):
            return
        if self.entries is None:
            self.entries = {first[0]: {first[1]}}
        self.entries.setdefault(stream, set()).add(entry_id)

    def extra_entries(self) -> int:
        """Entries beyond one per stream; ids seen without a stream join the one known stream."""
        if self.entries is None:
            return 0
        loose = self.entries.get(None, set())
        named = {s: ids for s, ids in self.entries.items() if s is not None}
        if not named:
            return len(loose) - 1
        if len(named) == 1:
            (ids,) = named.values()
            return len(ids | loose) - 1
        known = set().union(*named.values())
        extra = sum(len(ids) - 1 for ids in named.values())
        return extra + len(loose - known)

    def redelivered_now(self) -> bool:
        """Whether the event's latest delivery was a redelivery (claim, PEL, count > 1)."""
        return self.last_via in REDELIVERY_VIAS or self.last_count > 1

    def handle(self, at: float, recovered: bool) -> None:
        """Record a handling at `at`; the earliest one decides `recovered`."""
        if self.handled_at is None or at < self.handled_at:
            self.handled_at = at
            self.recovered = recovered

    def add_unknown(self, at: float, recovered: bool) -> None:
        if self.unknown is None:
            self.unknown = _Unknowns()
        self.unknown.applies.append(_Unknown(at, recovered))


@dataclass(frozen=True)
class _Unknown:
    """An apply whose outcome is unknown: `apply info`, or an invoke its killed process never
    completed. `at` is the info op's time (the invoke's for a dangling one); `recovered`
    whether it followed a redelivery after a fault started."""

    at: float
    recovered: bool


class _Unknowns:
    """An event's applies of unknown outcome and what the checker could prove about them."""

    __slots__ = ("applies", "proven", "indeterminate")

    def __init__(self) -> None:
        self.applies: list[_Unknown] = []
        self.proven = False         # an inbox `duplicate` proved that one of them committed
        self.indeterminate = False  # not handled, and one of them may have handled it

    def candidates(self) -> int:
        """How many of them may have committed (an inbox commits an event once)."""
        return 1 if self.proven else len(self.applies)


def _proves_commit(op: dict) -> bool:
    """A `duplicate` from a marker that commits with the effect (the PostgreSQL inbox row,
    `value.inbox`) proves an earlier apply of the event committed; a Redis SET NX marker
    (`value.dedupe`) does not, it is set before the effect is written."""
    value = op.get("value")
    return isinstance(value, dict) and value.get("inbox") is not None


class _RunScan:
    """One pass over a run's ops, collecting per-event and per-key facts."""

    def __init__(self) -> None:
        self.events: dict[str, _Event] = defaultdict(_Event)
        # key -> (order, version, event, seq): see _apply
        self.writes: dict[str, list[tuple[float, Any, str, int | None]]] = defaultdict(list)
        self.applied_versions: dict[str, list] = {}  # filled by order_writes(), in applied order
        self.reorders: dict[str, int] = {}
        self.reorder_examples: dict[str, list[str]] = {}  # the late writes' events
        self.fault_started = False
        self.first_fault_at: float | None = None
        self.retries = 0
        self.releases_failed = 0
        self.unprojected: set[str | None] = set()  # keys whose writes say they bump no projection
        self.vanished = Vanished()   # events whose entries a field fault removed (chaos/vanished.py)

    def scan(self, history: Iterable[dict]) -> None:
        try:
            self._scan(history)
        except KeyError as exc:
            raise HistoryError(f"op without {exc}: every op needs time, process, type and f "
                               "(write them with HistoryWriter.op, read them with read_history)") from None

    def _scan(self, history: Iterable[dict]) -> None:
        events = self.events
        for op in history:
            f = op["f"]
            kind = op["type"]
            if f == "deliver" or f == "publish" or f == "apply" or f == "dlq":
                eid = op.get("event_id")
                if eid is None:
                    continue
                ev = events[eid]
                if ev.key is None or ev.version is None:
                    ev.learn(op)
                if f == "deliver":
                    if kind == "ok":
                        ev.deliveries += 1
                        ev.add_entry(op.get("stream"), op.get("entry_id"))
                        ev.last_via = op.get("via")
                        ev.last_count = op.get("delivery_count") or 1
                elif f == "publish":
                    if kind == "invoke":
                        ev.open += 1
                        continue
                    if ev.open:
                        ev.open -= 1
                    if kind == "ok":
                        ev.ok = True
                        ev.add_entry(op.get("stream"), op.get("entry_id"))
                    elif kind == "info":
                        ev.info = True
                    else:
                        ev.failed = True
                elif f == "apply":
                    # invokes are matched with completions per event (a dangling one is unknown)
                    if kind == "invoke":
                        ev.apply_open += 1
                        ev.invoked_at = op["time"]
                        continue
                    if ev.apply_open:
                        ev.apply_open -= 1  # a reorder buffer's release is an `ok` without an invoke
                    if kind == "ok":
                        self._apply(op, ev)
                    elif kind == "info":  # the outcome is unknown (a lost COMMIT reply)
                        ev.add_unknown(op["time"], self.fault_started and ev.redelivered_now())
                elif kind == "ok":
                    ev.dlq = True
            elif f == "fault":
                value = op.get("value")
                if isinstance(value, dict) and value.get("phase") == "start":
                    self._fault_starts(op)
                    self.vanished.note(value)
            elif f == "failpoint":
                self._fault_starts(op)
            elif f == "retry":
                self.retries += 1
            elif f == "unlock":
                if kind == "fail" or (kind == "ok" and op.get("value") in (0, False, "0")):
                    self.releases_failed += 1

    def _fault_starts(self, op: dict) -> None:
        if not self.fault_started:
            self.fault_started, self.first_fault_at = True, op["time"]

    def _apply(self, op: dict, ev: _Event) -> None:
        effect = op.get("effect")
        rows = op.get("rows")
        if effect is None:  # older writers: infer from rows affected
            effect = "applied" if rows is None or rows > 0 else "stale"
        if effect == "applied" and rows == 0:
            effect = "stale"
        if effect not in HANDLED_EFFECTS:
            # "duplicate": the guard said seen; handling must be shown by another apply, or by
            # an inbox marker (it commits with the effect) after an unknown-outcome apply
            if effect == DUPLICATE_EFFECT and ev.unknown and ev.handled_at is None and _proves_commit(op):
                ev.unknown.proven = True
            return
        if ev.handled_at is None:  # ops come in time order: the first handling is the earliest
            ev.handled_at = op["time"]
            if self.fault_started:
                ev.recovered = ev.last_via in REDELIVERY_VIAS or ev.last_count > 1
        if effect != "applied":
            return
        ev.applied += 1
        key = op.get("key")
        key = ev.key if key is None else str(key)
        value = op.get("value")
        if value.__class__ is dict and value.get("projection") is False:
            self.unprojected.add(key)  # a guard that writes no projection (noop): nothing to hold
        if key is not None:
            # where the write stands in its key's commit order: `value.seq` (the row's write
            # sequence number, bumped and returned by the write itself) when the guard gives it;
            # and when it took effect: `value.locked_at` (taken while the row lock was held,
            # before COMMIT) when the guard gives it, else the op's time (written after COMMIT)
            order = op["time"]
            seq = None
            if value.__class__ is dict:
                locked_at = value.get("locked_at")
                if locked_at.__class__ is float or locked_at.__class__ is int:
                    order = locked_at
                seq = value.get("seq")
                if seq.__class__ is not int:
                    seq = None
            self.writes[key].append((order, op.get("version", ev.version), op["event_id"], seq))

    def close_dangling(self) -> None:
        """A publish invoke without completion (its process was killed) is an `info`; so is
        an apply invoke: the process may have died after COMMIT, before writing `ok`."""
        for ev in self.events.values():
            if ev.open > 0:
                ev.info = True
            if ev.apply_open > 0:
                # (the latest invoke stands for each: a redelivery after the death invokes again)
                after_fault = self.first_fault_at is not None and self.first_fault_at <= ev.invoked_at
                for _ in range(ev.apply_open):
                    ev.add_unknown(ev.invoked_at, after_fault and ev.redelivered_now())
                ev.apply_open = 0

    def order_writes(self) -> None:
        """Each key's effective writes in the order they took effect, then the writes older
        than one before. The order is the commit order (`seq`) when every write of the key
        has one, else `locked_at` or the op's time (older and black-box histories; a stable
        sort keeps the ops' order on ties)."""
        for key, writes in self.writes.items():
            writes.sort(key=_SEQ if all(w[3] is not None for w in writes) else _ORDER)
            versions = [w[1] for w in writes]
            self.applied_versions[key] = versions
            top = None
            late: list[str] = []
            n = 0
            for _, version, eid, _ in writes:
                if version is None:
                    continue
                try:
                    if top is None or version > top:
                        top = version
                    elif version < top:
                        n += 1
                        if len(late) < MAX_EXAMPLES:
                            late.append(eid)
                except TypeError:
                    raise HistoryError(f"apply of {eid} on key {key}: version {version!r} cannot be compared "
                                       f"with {top!r}; `version` must be the business version (an int)") from None
            if n:
                self.reorders[key] = n
                self.reorder_examples[key] = late


def _ids(items: list[dict]) -> set[str]:
    return {item["event_id"] for item in items if item.get("event_id") is not None}


def check_run(history: list[dict], final: FinalState, *, run: int = 0,
              unknown_reasons: Iterable[str] = (), seed: int | None = None,
              rig_failures: Iterable[str] = (), explained: Iterable[str] = (),
              consumers_live: bool = False) -> RunResult:
    """Counts, anomalies and verdict of one run (pure: no I/O).

    `rig_failures` (the framework's own parts that failed) make the verdict unknown even
    where the counts show a violation: what the rig broke is no evidence against a strategy.
    `explained` names the counts the run's faults explain (`unattempted`: a killed producer);
    an unexplained `unattempted` is an unknown reason (the run did not do what it planned).
    `consumers_live`: the drain ended with a live consumer that every fault had healed
    toward and that made no more progress, so what still waits in Redis unhandled was left
    by the consumer (`stopped-consuming`, invalid), not by a drain cut short.
    """
    if not isinstance(final, FinalState):
        raise TypeError(f"check_run needs a chaos.checker.FinalState, got {type(final).__name__}; "
                        "build it with FinalState(rows=..., pending=..., ...)")
    with paused_gc():
        result = _check_run(history, final, run, list(unknown_reasons), seed, frozenset(explained),
                            consumers_live)
    rig = list(rig_failures)
    if rig:
        result.rig_failures = rig
        result.unknown_reasons += [r for r in rig if r not in result.unknown_reasons]
        result.verdict = UNKNOWN
    return result


def _check_run(history: list[dict], final: FinalState, run: int, reasons: list[str],
               seed: int | None, explained: frozenset[str], consumers_live: bool = False) -> RunResult:
    scan = _RunScan()
    scan.scan(history)
    scan.close_dangling()
    redis_ids = _absorb_final(scan.events, final)
    scan.order_writes()
    _resolve_unknown_applies(scan, final)
    counts = Counts(pending_left=len(final.pending), undelivered=len(final.undelivered),
                    dlq=len(final.dlq), retries=scan.retries, releases_failed=scan.releases_failed)
    anomalies = AnomalyLog(run)
    redis_ids["stopped"] = set()   # filled by _count_events when consumers_live
    published_by_key = _count_events(scan, redis_ids, counts, anomalies, history, consumers_live)
    for key, n in scan.reorders.items():
        counts.reordered += n
        anomalies.add(REORDERED, key, count=n, versions=scan.applied_versions[key],
                      examples=scan.reorder_examples[key],
                      detail="a version older than one already applied was written")
    final_state = {str(k): {"status": row.get("status"), "version": row.get("version")}
                   for k, row in final.rows.items()}
    _check_final_state(published_by_key, final_state, scan, redis_ids, counts, anomalies)
    _check_projection(final.projection, scan, counts, anomalies)
    if counts.unattempted and "unattempted" not in explained and not reasons:
        # (a run already unknown, cut short by a stall or a dead worker, explains what it never tried)
        reasons.append(f"{counts.unattempted} intended events were never attempted (no publish, no outbox "
                       "row, no delivery): the run did not do what it planned and no fault explains it")
    if violations(counts) or anomalies.per_kind.get(STOPPED_CONSUMING):
        verdict = INVALID
    elif reasons:
        verdict = UNKNOWN
    else:
        verdict = VALID
    return RunResult(run=run, counts=counts, verdict=verdict, anomalies=anomalies.kept,
                     anomaly_counts=dict(anomalies.per_kind), final_state=final_state,
                     unknown_reasons=reasons, seed=seed)


def _absorb_final(events: dict[str, _Event], final: FinalState) -> dict[str, set[str]]:
    """Fold the final Redis/PostgreSQL lists into the events; returns their event id sets."""
    for intended in final.events:
        if intended.get("event_id") is not None:
            events[intended["event_id"]].learn(intended)
    for source in (final.stream_entries, final.pending, final.undelivered):
        for entry in source:
            if entry.get("event_id") is not None:
                events[entry["event_id"]].add_entry(entry.get("stream"), entry.get("entry_id"))
    for row in final.outbox:
        if row.get("event_id") is not None:
            events[row["event_id"]].learn(row)
    ids = {"stream": _ids(final.stream_entries), "pending": _ids(final.pending),
           "undelivered": _ids(final.undelivered), "outbox": _ids(final.outbox),
           "intended": _ids(final.events)}
    for eid in _ids(final.dlq):
        events[eid].dlq = True
    return ids


ALL_LANDED, NONE_LANDED = "all", "none"


def _resolve_unknown_applies(scan: _RunScan, final: FinalState) -> None:
    """Decide what the unknown-outcome applies did where the inbox, the projection or the final
    row proves it; the rest leave their event indeterminate (docs/checker.md, "Unknown-outcome
    applies"). Runs after order_writes: landed unknown writes take no part in `reordered`."""
    by_key: dict[str | None, list[_Event]] = defaultdict(list)
    for ev in scan.events.values():
        if ev.unknown:
            by_key[ev.key].append(ev)
    if not by_key:
        return
    projection = {str(k): v for k, v in final.projection.items()}
    rows = {str(k): v for k, v in final.rows.items()}
    for key, evs in by_key.items():
        writes = scan.writes.get(key, [])
        landed = _projection_says(writes, evs, projection.get(key))
        for ev in evs:
            _resolve_event(ev, landed, rows.get(key), writes)


def _projection_says(writes: list, evs: list[_Event], counter: Any) -> str | None:
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


def _resolve_event(ev: _Event, landed: str | None, row: dict | None, writes: list) -> None:
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


def _row_written_by(ev: _Event, row: dict | None, writes: list) -> bool:
    """The final row holds this event's state and no known write of its version exists, so
    one of its unknown applies wrote it."""
    if row is None or ev.version is None or ev.applied:
        return False
    if row.get("version") != ev.version or row.get("status") != ev.etype:
        return False
    return all(w[1] != ev.version for w in writes)


def _commit_would_write(ev: _Event, at: float, writes: list) -> bool:
    """Whether a commit at `at` would have changed the row (and its projection) under any
    guard: no known write before it had a version at or above the event's."""
    before = [w[1] for w in writes if w[0] < at]
    if ev.version is None:
        return not before
    try:
        return all(v is None or v < ev.version for v in before)
    except TypeError:
        return False


def _count_events(scan: _RunScan, ids: dict[str, set[str]], counts: Counts, anomalies: AnomalyLog,
                  history: list[dict] = (), consumers_live: bool = False
                  ) -> dict[str, list[tuple[Any, str | None, str]]]:
    """The per-event counts; returns each key's published (version, etype, event_id)."""
    published_by_key: dict[str, list[tuple[Any, str | None, str]]] = defaultdict(list)
    by_kind: dict[str, dict[str | None, list[str]]] = {LOST: defaultdict(list), DUPLICATED: defaultdict(list),
                                                       UNEXPECTED: defaultdict(list),
                                                       STOPPED_CONSUMING: defaultdict(list)}
    waiting = ids["pending"] | ids["undelivered"]
    in_redis = ids["stream"] | waiting
    published_indeterminate = 0
    for eid, ev in scan.events.items():
        handled = ev.handled_at is not None
        seen = ev.deliveries > 0 or handled or ev.dlq or eid in in_redis
        # a publish that said `fail` yet shows up downstream went through: its error was misread
        published = ev.ok or eid in ids["outbox"] or ((ev.info or ev.failed) and seen)
        if ev.deliveries:
            counts.delivered += 1
            counts.redelivered += ev.deliveries - 1
        counts.duplicate_entries += ev.extra_entries()
        if handled:
            counts.handled += 1
            counts.recovered += ev.recovered
            counts.handled_pending += eid in ids["pending"]
        if ev.applied > 1:
            counts.duplicated += 1
            by_kind[DUPLICATED][ev.key].append(eid)
        if published:
            counts.published += 1
            if not (ev.ok or ev.info or eid in ids["outbox"]):
                counts.failed_publish_seen += 1
            if ev.key is not None:
                published_by_key[ev.key].append((ev.version, ev.etype, eid))
            if not handled and not ev.dlq and eid not in waiting:
                if ev.unknown is not None and ev.unknown.indeterminate:
                    counts.indeterminate += 1  # an apply of unknown outcome may have handled it
                    published_indeterminate += 1
                else:
                    counts.lost += 1
                    by_kind[LOST][ev.key].append(eid)
            elif consumers_live and not handled and not ev.dlq:   # waits in Redis: nobody consumed it
                ids["stopped"].add(eid)
                counts.stopped_consuming += 1
                by_kind[STOPPED_CONSUMING][ev.key].append(eid)
        elif ev.info:
            counts.indeterminate += 1
        elif ev.failed and not (ev.deliveries or handled):
            counts.dropped += 1     # every attempt refused (OOM, a dead link): the producer gave up on it
        elif seen or ev.unknown is not None:
            counts.unexpected += 1  # delivered, handled or in Redis, yet nobody ever tried to publish it
            by_kind[UNEXPECTED][ev.key].append(eid)
        else:
            counts.unattempted += 1  # intended, and no process ever tried to publish it
    _check_accounting(len(scan.events), counts, published_indeterminate, ids["intended"])
    details = {LOST: "published, never handled", DUPLICATED: "effect applied more than once",
               UNEXPECTED: "delivered or handled although no process ever published it", **VANISHED_DETAILS,
               STOPPED_CONSUMING: "published, still undelivered or pending, never handled by a live consumer"}
    by_kind = {**scan.vanished.split(by_kind.pop(LOST)), **by_kind}   # lost: named by how, where a fault says
    concurrent = overlaps(history, [e for eids in by_kind[DUPLICATED].values() for e in eids])
    for kind, per_key in by_kind.items():
        for key, eids in per_key.items():
            detail = details[kind]
            if kind == DUPLICATED and any(e in concurrent for e in eids):
                detail += "; " + concurrent[next(e for e in sorted(eids) if e in concurrent)]
            anomalies.add(kind, key, count=len(eids), examples=eids,
                          versions=scan.applied_versions.get(key, []), detail=detail)
    return published_by_key


def _check_accounting(known: int, counts: Counts, published_indeterminate: int, intended: set[str]) -> None:
    """Every event is in exactly one of published, dropped, indeterminate (never published),
    unexpected and unattempted, and no intended event is missing from them: a count that
    leaks an event is a bug in the checker, never a figure to report."""
    unpublished_indeterminate = counts.indeterminate - published_indeterminate
    total = (counts.published + counts.dropped + unpublished_indeterminate + counts.unexpected
             + counts.unattempted)
    if total != known or len(intended) > known:
        raise AssertionError(
            f"event accounting broken: published {counts.published} + dropped {counts.dropped} + "
            f"indeterminate (never published) {unpublished_indeterminate} + unexpected {counts.unexpected} + "
            f"unattempted {counts.unattempted} = {total}, but the run knows {known} events "
            f"({len(intended)} intended): an event fell through chaos.checker._count_events")


def _check_final_state(published_by_key: dict[str, list[tuple[Any, str | None, str]]],
                       final_state: dict[str, dict], scan: _RunScan, ids: dict[str, set[str]],
                       counts: Counts, anomalies: AnomalyLog) -> None:
    """Each key's final status must be the etype of its highest published business version;
    a wrong key whose highest event is still waiting in Redis or in the DLQ is unsettled."""
    waiting = ids["pending"] | ids["undelivered"]
    for key, published in published_by_key.items():
        versioned = [p for p in published if p[0] is not None]
        if not versioned:
            continue  # bulk jobs without versions
        top_version, top_etype, top_eid = max(versioned, key=lambda p: p[0])
        row = final_state.get(key) or {}
        if row.get("status") != top_etype:
            counts.wrong_keys += 1
            stopped = top_eid in ids.get("stopped", ())
            unsettled = (top_eid in waiting and not stopped) or scan.events[top_eid].dlq
            counts.unsettled_keys += unsettled
            anomalies.add(WRONG_FINAL_STATE, key, examples=[top_eid],
                          versions=scan.applied_versions.get(key, []),
                          detail=f"expected {top_etype} (v={top_version}), final "
                                 f"{row.get('status')} (v={row.get('version')})"
                                 + (UNSETTLED_NOTE if unsettled else STOPPED_NOTE if stopped else ""))
    counts.wrong_final_state_runs = int(counts.wrong_keys > 0)


def _check_projection(projection: dict[str, int], scan: _RunScan, counts: Counts,
                      anomalies: AnomalyLog) -> None:
    """A projection counter should equal the number of its key's events applied at least once.
    A counter below it is an effect the workers claim and PostgreSQL does not hold
    (`negative_drift`, a violation: the self-report is wrong); above it, an effect applied
    again (`projection_drift` only, as `duplicated` is)."""
    if not projection:
        return
    applied: dict[str, int] = defaultdict(int)
    for ev in scan.events.values():
        if ev.applied and ev.key is not None:
            applied[ev.key] += 1
    for key, value in projection.items():
        key = str(key)
        if key in scan.unprojected:
            continue
        expected = applied.get(key, 0)
        drift = int(value) - expected
        if drift:
            counts.projection_drift += abs(drift)
            anomalies.add(PROJECTION_DRIFT, key, count=abs(drift),
                          detail=f"projection {value}, events applied {expected}")
        if drift < 0:
            counts.negative_drift -= drift
            anomalies.add(UNHELD_EFFECT, key, count=-drift,
                          detail=f"the workers claim {expected} events applied, PostgreSQL's projection "
                                 f"holds {value}")
