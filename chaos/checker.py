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

from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Any
from operator import itemgetter

from chaos.history import HistoryError, HistorySource, paused_gc
from chaos.results import (  # noqa: F401 - the records' old home: these names stay importable from here
    COUNT_NAMES, DUPLICATED, INVALID, LOST, MAX_ANOMALIES_PER_KIND, MAX_EXAMPLES, PROJECTION_DRIFT, REORDERED,
    SCHEMA_VERSION, STOPPED_CONSUMING, UNEXPECTED, UNHELD_EFFECT, UNKNOWN, VALID, VERDICT_PRIORITY,
    WRONG_FINAL_STATE, Anomaly, AnomalyLog, CellResult, Counts, FinalRows, FinalState, RunResult, final_state_of,
    merge_verdicts, summarize, violations)
from chaos.checkstore import (  # noqa: F401 - the records' home; these names stay importable from here
    ASIDE, DLQ, FAILED, IN_REDIS, IN_STREAM, INFO, INTENDED, NOTED, OK, OUTBOX, PENDING, RECOVERED, REDELIVERED,
    UNDELIVERED, UNPROJECTED, WAITING, _Event, _Events, _Writes)
from chaos.checkstore import absorb_final as _absorb_final
from chaos.vanished import DETAILS as VANISHED_DETAILS
from chaos.unknown_applies import proves_commit, resolve_unknown_applies
from chaos.vanished import Vanished, overlaps

HANDLED_EFFECTS = frozenset({"applied", "stale"})
DUPLICATE_EFFECT = "duplicate"
REDELIVERY_VIAS = frozenset({"claim", "pending"})
_ORDER = itemgetter(0)  # a write's (order, version, event_id, seq): when it took effect ...
_SEQ = itemgetter(3)    # ... and its key's commit-ordered write number, when the guard gave one

NOT_READ = b'"f":"ack"'   # the lines of the only ops the checker passes over: a HistorySource may skip them
UNSETTLED_NOTE = "; its highest event is still pending, undelivered or in the DLQ (unsettled: not a violation)"
STOPPED_NOTE = "; its highest event waits in Redis and a live consumer never took it (stopped-consuming)"


class _RunScan:
    """One pass over a run's ops, collecting per-event and per-key facts."""

    def __init__(self) -> None:
        self.events = _Events()   # event id -> its record, kept as columns (chaos/checkstore.py)
        self.writes = _Writes(self.events)   # key -> [(order, version, event_id, seq)]: see _apply and _Writes
        self.reorders: dict[str, int] = {}
        self.reorder_examples: dict[str, list[str]] = {}  # the late writes' events
        self.fault_started = False
        self.first_fault_at: float | None = None
        self.retries = 0
        self.releases_failed = 0
        # keys whose writes say they bump no projection (the event's own key: its UNPROJECTED bit instead)
        self.unprojected: set[str | None] = set()
        # invokes not completed yet, per event (off the records: 10^6 events, two slots less)
        self.publishing: dict[str, int] = {}   # event -> its publish invokes open
        self.applying: dict[str, int] = {}     # event -> its apply invokes open ...
        self.invoked: dict[str, float] = {}    # ... and the latest one's time
        self.vanished = Vanished()   # events whose entries a field fault removed (chaos/vanished.py)

    def scan(self, history: Iterable[dict]) -> None:
        try:
            self._scan(history)
        except KeyError as exc:
            raise HistoryError(f"op without {exc}: every op needs time, process, type and f "
                               "(write them with HistoryWriter.op, read them with read_history)") from None

    def _scan(self, history: Iterable[dict]) -> None:
        events = self.events   # (its columns, read and written by row: chaos/checkstore.py)
        index, add, where, keys, versions = events.index, events.add, events.where, events.keys, events.version
        # (bound once per batch, not looked up per op: 5 x 10^6 ops at 10^6 events)
        learn, add_entry, deliveries = events.learn_fields, events.add_entry, events.deliveries
        publishing, applying, invoked, apply = self.publishing, self.applying, self.invoked, self._apply
        for op in history:
            f = op["f"]
            kind = op["type"]
            if f == "deliver" or f == "publish" or f == "apply" or f == "dlq":
                eid = op.get("event_id")
                if eid is None:
                    continue
                i = index.get(eid)
                if i is None:
                    i = add(eid)
                if keys[i] is None or versions[i] == ASIDE:
                    learn(i, op.get("key"), op.get("version"), op.get("etype"))
                if f == "deliver":
                    if kind == "ok":
                        deliveries[i] += 1
                        add_entry(i, op.get("stream"), op.get("entry_id"))
                        if op.get("via") in REDELIVERY_VIAS or (op.get("delivery_count") or 1) > 1:
                            where[i] |= REDELIVERED
                        elif where[i] & REDELIVERED:
                            where[i] &= ~REDELIVERED
                elif f == "publish":
                    if kind == "invoke":
                        publishing[eid] = publishing.get(eid, 0) + 1
                        continue
                    n = publishing.get(eid)
                    if n is not None:
                        if n == 1:
                            del publishing[eid]
                        else:
                            publishing[eid] = n - 1
                    if kind == "ok":
                        where[i] |= OK
                        add_entry(i, op.get("stream"), op.get("entry_id"))
                    elif kind == "info":
                        where[i] |= INFO
                    else:
                        where[i] |= FAILED
                elif f == "apply":
                    # invokes are matched with completions per event (a dangling one is unknown)
                    if kind == "invoke":
                        applying[eid] = applying.get(eid, 0) + 1
                        invoked[eid] = op["time"]
                        continue
                    n = applying.get(eid)   # (none: a reorder buffer's release is an `ok` without an invoke)
                    if n is not None:
                        if n == 1:
                            del applying[eid], invoked[eid]
                        else:
                            applying[eid] = n - 1
                    if kind == "ok":
                        apply(op, i)
                    elif kind == "info":  # the outcome is unknown (a lost COMMIT reply)
                        events.add_unknown(i, op["time"], self.fault_started and bool(where[i] & REDELIVERED))
                elif kind == "ok":
                    where[i] |= DLQ
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

    def _apply(self, op: dict, i: int) -> None:
        events = self.events
        where = events.where
        effect = op.get("effect")
        if effect in HANDLED_EFFECTS:
            where[i] |= NOTED   # (WorkNotes' count of events handled: a flag here, not a set of 10^6 ids there)
        rows = op.get("rows")
        if effect is None:  # older writers: infer from rows affected
            effect = "applied" if rows is None or rows > 0 else "stale"
        if effect == "applied" and rows == 0:
            effect = "stale"
        if effect not in HANDLED_EFFECTS:
            # "duplicate": the guard said seen; handling must be shown by another apply, or by
            # an inbox marker (it commits with the effect) after an unknown-outcome apply
            unknown = events.unknown.get(i)
            if (effect == DUPLICATE_EFFECT and unknown and events.get_handled_at(i) is None
                    and proves_commit(op)):
                unknown.proven = True
            return
        handled_at = events.handled_at
        t = handled_at[i]
        if t != t and i not in events.aside["handled_at"]:  # none yet: ops come in time order, the first is the earliest
            t = op["time"]
            if t.__class__ is float and t == t:
                handled_at[i] = t
            else:
                events.set_handled_at(i, t)
            if self.fault_started and where[i] & REDELIVERED:
                where[i] |= RECOVERED
        if effect != "applied":
            return
        events.applied[i] += 1
        key = op.get("key")
        own = events.keys[i]
        if key is not None:
            key = str(key)
            key = own if key == own else events.key_str(key)   # (the interned str the record holds: one per key)
        else:
            key = own
        value = op.get("value")
        if value.__class__ is dict and value.get("projection") is False:
            # a guard that writes no projection (noop): nothing to hold
            if key is own:
                where[i] |= UNPROJECTED
            else:
                self.unprojected.add(key)
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
            version = op["version"] if "version" in op else events.get_version(i)
            self.writes.add(key, i if events.own_write(i, key, order, version, seq)
                            else (order, version, events.eids[i], seq))

    def close_dangling(self) -> None:
        """A publish invoke without completion (its process was killed) is an `info`; so is
        an apply invoke: the process may have died after COMMIT, before writing `ok`."""
        events = self.events
        for eid in self.publishing:
            events[eid].where |= INFO
        for eid, n in self.applying.items():
            ev = events[eid]
            # (the latest invoke stands for each: a redelivery after the death invokes again)
            invoked_at = self.invoked[eid]
            after_fault = self.first_fault_at is not None and self.first_fault_at <= invoked_at
            for _ in range(n):
                ev.add_unknown(invoked_at, after_fault and ev.redelivered_now())
        self.publishing, self.applying, self.invoked = {}, {}, {}

    def order_writes(self) -> None:
        """Each key's effective writes in the order they took effect, then the writes older
        than one before. The order is the commit order (`seq`) when every write of the key
        has one, else `locked_at` or the op's time (older and black-box histories; a stable
        sort keeps the ops' order on ties)."""
        for key, writes in self.writes.items():
            if writes.__class__ is not list:
                continue   # one write: nothing to sort, nothing older than another
            writes.sort(key=_SEQ if all(w[3] is not None for w in writes) else _ORDER)
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

    def applied_versions(self, key: str) -> list:
        """The key's applied versions in applied order (after order_writes; made when an anomaly
        names them, not kept: with a key per event that was a list per event)."""
        return [w[1] for w in self.writes.get(key, ())]


def check_run(history: Iterable[dict], final: FinalState, *, run: int = 0,
              unknown_reasons: Iterable[str] = (), seed: int | None = None,
              rig_failures: Iterable[str] = (), explained: Iterable[str] = (),
              consumers_live: bool = False,
              observe: Callable[[Iterable[dict], dict], Iterable[dict]] | None = None,
              folded: Any = None) -> RunResult:
    """Counts, anomalies and verdict of one run (pure: no I/O but `history`'s own).

    `history`: the ops in time order, a list or a `chaos.history.HistorySource` (the run dir's
    files, read lazily; passed over once, and once more only for duplicated events' apply runs).
    The final state's `stream_entries` and `events` may be any iterable, read once.

    `rig_failures` (the framework's own parts that failed) make the verdict unknown even
    where the counts show a violation: what the rig broke is no evidence against a strategy.
    `explained` names the counts the run's faults explain (`unattempted`: a killed producer);
    an unexplained `unattempted` is an unknown reason (the run did not do what it planned).
    `consumers_live`: the drain ended with a live consumer that every fault had healed
    toward and that made no more progress, so what still waits in Redis unhandled was left
    by the consumer (`stopped-consuming`, invalid), not by a drain cut short.
    `observe(ops, events)` (optional) sees the ops of the checker's pass and gives them on: another
    fold over the history in the same pass (chaos.orchestrator.notes.WorkNotes); `events` is the
    checker's event id -> record map, complete with each op once the op is given on (a record's
    `where & NOTED`: an apply `ok` of it said `effect` applied or stale).
    `folded.take()` (optional) gives a `_RunScan` already fed this whole history in its order, once
    (chaos.orchestrator.livefold, with `observe` fed too), or None: then the history is scanned.
    """
    if not isinstance(final, FinalState):
        raise TypeError(f"check_run needs a chaos.checker.FinalState, got {type(final).__name__}; "
                        "build it with FinalState(rows=..., pending=..., ...)")
    def checked(ops: Iterable[dict]) -> RunResult:
        # (the observed pass is one-shot; the duplicated events' second pass reads `ops` again)
        return _check_run(ops, final, run, list(unknown_reasons), seed, frozenset(explained), consumers_live,
                          again=ops, observe=observe, scan=folded.take() if folded is not None else None)
    with paused_gc():
        result = history.passes(checked) if isinstance(history, HistorySource) else checked(history)
    rig = list(rig_failures)
    if rig:
        result.rig_failures = rig
        result.unknown_reasons += [r for r in rig if r not in result.unknown_reasons]
        result.verdict = UNKNOWN
    return result


def _check_run(history: Iterable[dict], final: FinalState, run: int, reasons: list[str],
               seed: int | None, explained: frozenset[str], consumers_live: bool = False,
               again: Iterable[dict] | None = None,
               observe: Callable[[Iterable[dict], dict], Iterable[dict]] | None = None,
               scan: _RunScan | None = None) -> RunResult:
    if scan is None:   # (else already fed the whole history: chaos.orchestrator.livefold)
        scan = _RunScan()
        scan.scan(history if observe is None else observe(history, scan.events))
    scan.close_dangling()
    intended = _absorb_final(scan.events, final)
    scan.order_writes()
    resolve_unknown_applies(scan.events, scan.writes, final)
    counts = Counts(pending_left=len(final.pending), undelivered=len(final.undelivered),
                    dlq=len(final.dlq), retries=scan.retries, releases_failed=scan.releases_failed)
    anomalies = AnomalyLog(run)
    stopped: set[str] = set()   # filled by _count_events when consumers_live
    top_by_key = _count_events(scan, intended, stopped, counts, anomalies,
                               history if again is None else again, consumers_live)
    for key, n in scan.reorders.items():
        counts.reordered += n
        anomalies.add(REORDERED, key, count=n, versions=scan.applied_versions(key),
                      examples=scan.reorder_examples[key],
                      detail="a version older than one already applied was written")
    final_state = final_state_of(final.rows)
    _check_final_state(top_by_key, final_state, scan, stopped, counts, anomalies)
    del top_by_key   # (a tuple per key: freed before the projection's count per key is made)
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


def _count_events(scan: _RunScan, intended: int, stopped: set[str], counts: Counts, anomalies: AnomalyLog,
                  history: Iterable[dict] = (), consumers_live: bool = False
                  ) -> dict[str, int | None]:
    """The per-event counts; returns each key's highest published event (its row: the first of
    equal highest versions; None: no published event of the key has a version)."""
    top_by_key: dict[str, int | None] = {}
    by_kind: dict[str, dict[str | None, list[str]]] = {LOST: defaultdict(list), DUPLICATED: defaultdict(list),
                                                       UNEXPECTED: defaultdict(list),
                                                       STOPPED_CONSUMING: defaultdict(list)}
    events = scan.events   # (read by row, column by column: chaos/checkstore.py)
    wheres, deliveries, applied, handled_at, keys = (events.where, events.deliveries, events.applied,
                                                     events.handled_at, events.keys)
    versions, odd_version, odd_time = events.version, events.aside["version"], events.aside["handled_at"]
    entries, unknowns = events.entries, events.unknown
    published_indeterminate = delivered_n = redelivered_n = handled_n = recovered_n = handled_pending_n = published_n = 0
    for eid, i in zip(events.eids, events.seal()):   # (sealed: the id index's memory is top_by_key's)
        t = handled_at[i]
        handled = t == t or i in odd_time   # (NaN: none, or one kept aside)
        where = wheres[i]
        delivered = deliveries[i]
        key = keys[i]
        seen = delivered > 0 or handled or where & (DLQ | IN_REDIS)
        # a publish that said `fail` yet shows up downstream went through: its error was misread
        published = where & (OK | OUTBOX) or (where & (INFO | FAILED) and seen)
        if delivered:
            delivered_n += 1
            redelivered_n += delivered - 1
        if i in entries:
            counts.duplicate_entries += events.extra_entries(i)
        if handled:
            handled_n += 1
            recovered_n += (where & RECOVERED) > 0
            handled_pending_n += (where & PENDING) > 0
        if applied[i] > 1:
            counts.duplicated += 1
            by_kind[DUPLICATED][key].append(eid)
        if published:
            published_n += 1
            if not where & (OK | INFO | OUTBOX):
                counts.failed_publish_seen += 1
            if key is not None:
                top = top_by_key.get(key)   # (the event's row: 10^6 keys, no tuple each)
                version = versions[i]
                if version == ASIDE:
                    version = odd_version.get(i)
                if version is not None:
                    if top is None:
                        top_by_key[key] = i
                    else:
                        top_version = versions[top]
                        if version > (top_version if top_version != ASIDE else odd_version.get(top)):
                            top_by_key[key] = i
                elif top is None:
                    top_by_key[key] = None
            if not handled and not where & (DLQ | WAITING):
                unknown = unknowns.get(i)
                if unknown is not None and unknown.indeterminate:
                    counts.indeterminate += 1  # an apply of unknown outcome may have handled it
                    published_indeterminate += 1
                else:
                    counts.lost += 1
                    by_kind[LOST][key].append(eid)
            elif consumers_live and not handled and not where & DLQ:   # waits in Redis: nobody consumed it
                stopped.add(eid)
                counts.stopped_consuming += 1
                by_kind[STOPPED_CONSUMING][key].append(eid)
        elif where & INFO:
            counts.indeterminate += 1
        elif where & FAILED and not (delivered or handled):
            counts.dropped += 1     # every attempt refused (OOM, a dead link): the producer gave up on it
        elif seen or i in unknowns:
            counts.unexpected += 1  # delivered, handled or in Redis, yet nobody ever tried to publish it
            by_kind[UNEXPECTED][key].append(eid)
        else:
            counts.unattempted += 1  # intended, and no process ever tried to publish it
    _add_counts(counts, delivered=delivered_n, redelivered=redelivered_n, handled=handled_n, recovered=recovered_n,
                handled_pending=handled_pending_n, published=published_n)
    _check_accounting(len(scan.events), counts, published_indeterminate, intended)
    _add_event_anomalies(scan, by_kind, anomalies, history)
    return top_by_key


def _add_counts(counts: Counts, **tallies: int) -> None:
    """Each tally added to its count (_count_events keeps the counts every event moves in locals:
    an attribute's read and write per event, 10^6 times, was 0.1 CPU s)."""
    for name, n in tallies.items():
        setattr(counts, name, getattr(counts, name) + n)


def _add_event_anomalies(scan: _RunScan, by_kind: dict[str, dict[str | None, list[str]]], anomalies: AnomalyLog,
                         history: Iterable[dict]) -> None:
    """The anomalies of the events counted, per kind and key (lost ones named by how they were
    lost where a fault says; duplicates with the overlap of their apply runs)."""
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
                          versions=scan.applied_versions(key), detail=detail)


def _check_accounting(known: int, counts: Counts, published_indeterminate: int, intended: int) -> None:
    """Every event is in exactly one of published, dropped, indeterminate (never published),
    unexpected and unattempted, and no intended event is missing from them: a count that
    leaks an event is a bug in the checker, never a figure to report."""
    unpublished_indeterminate = counts.indeterminate - published_indeterminate
    total = (counts.published + counts.dropped + unpublished_indeterminate + counts.unexpected
             + counts.unattempted)
    if total != known or intended > known:
        raise AssertionError(
            f"event accounting broken: published {counts.published} + dropped {counts.dropped} + "
            f"indeterminate (never published) {unpublished_indeterminate} + unexpected {counts.unexpected} + "
            f"unattempted {counts.unattempted} = {total}, but the run knows {known} events "
            f"({intended} intended): an event fell through chaos.checker._count_events")


def _check_final_state(top_by_key: dict[str, int | None], final_state: Mapping[str, dict],
                       scan: _RunScan, stopped: set[str], counts: Counts, anomalies: AnomalyLog) -> None:
    """Each key's final status must be the etype of its highest published business version;
    a wrong key whose highest event is still waiting in Redis or in the DLQ is unsettled.
    (One pass over 10^6 keys: the etype read off its column; once no more anomalies of the
    kind are kept, the rest are counted at the end, not one call each.)"""
    events = scan.events
    wheres, eids, etypes, table, odd_etypes = (events.where, events.eids, events.etype, events.table,
                                               events.aside["etype"])
    place, rows = _rows_by_top(top_by_key, final_state, len(eids))
    kept, counted_only, wrong, unsettled_keys = True, 0, 0, 0
    for key, top in top_by_key.items():
        if top is None:
            continue  # bulk jobs without versions
        code = etypes[top]
        top_etype = table[code] if code > 0 else odd_etypes.get(top)   # (events.get_etype)
        j = place[top]
        row = rows[j] if j >= 0 else _NO_ROW
        if row.get("status") != top_etype:
            where = wheres[top]
            wrong += 1
            is_stopped = bool(stopped) and eids[top] in stopped
            unsettled = bool(where & WAITING and not is_stopped) or bool(where & DLQ)
            unsettled_keys += unsettled
            if not kept:
                counted_only += 1
                continue
            if anomalies.counted_only(WRONG_FINAL_STATE):
                kept = False   # (and stays so: no more of the kind are kept)
                continue
            anomalies.add(WRONG_FINAL_STATE, key, examples=[eids[top]],
                          versions=scan.applied_versions(key),
                          detail=f"expected {top_etype} (v={events.get_version(top)}), final "
                                 f"{row.get('status')} (v={row.get('version')})"
                                 + (UNSETTLED_NOTE if unsettled else STOPPED_NOTE if is_stopped else ""))
    if counted_only:
        anomalies.counted_only(WRONG_FINAL_STATE, counted_only)
    counts.wrong_keys += wrong
    counts.unsettled_keys += unsettled_keys
    counts.wrong_final_state_runs = int(counts.wrong_keys > 0)


_NO_ROW: Mapping[str, Any] = {}   # (a key PostgreSQL has no row for; read, never written)


def _rows_by_top(top_by_key: dict[str, int | None], final_state: Mapping[str, dict],
                 n: int) -> tuple[array, list[dict]]:
    """(place, rows): the final row of the key whose highest event is `top` is rows[place[top]],
    none where that is -1. The rows (FinalRows' list as PostgreSQL's rows are read, else the
    mapping's) are laid beside the counting's map, each row's place by its key's highest event:
    one pass over the rows, looked up in that map (no index over 10^6 keys)."""
    if final_state.__class__ is FinalRows:
        keys, rows = final_state.keys_read, final_state.rows
    else:
        keys, rows = list(final_state), [row or _NO_ROW for row in final_state.values()]
    place = array("i", [-1]) * n
    get = top_by_key.get
    for j, key in enumerate(keys):
        top = get(key)
        if top is not None:
            place[top] = j
    return place, rows


def _check_projection(projection: Any, scan: _RunScan, counts: Counts,
                      anomalies: AnomalyLog) -> None:
    """A projection counter should equal the number of its key's events applied at least once.
    A counter below it is an effect the workers claim and PostgreSQL does not hold
    (`negative_drift`, a violation: the self-report is wrong); above it, an effect applied
    again (`projection_drift` only, as `duplicated` is).
    When no event was applied with a projection, every expected count is 0 or not compared:
    only the counters above 0 can drift, and a projection that can read just those
    (`nonzero_items`: PagedProjection, PostgreSQL's WHERE) gives them alone (10^6 keys of a
    guard that writes no projection: no row read, no map of every key)."""
    wheres, applies = scan.events.where, scan.events.applied
    counted = any(a and not w & UNPROJECTED for a, w in zip(applies, wheres))
    nonzero = getattr(projection, "nonzero_items", None)
    # (a dict, or read a page at a time: PagedProjection)
    counters = iter(projection.items() if counted or nonzero is None else nonzero())
    first = next(counters, None)
    if first is None:
        return
    applied: dict[str, int | None] = {}   # key -> its events applied; None: its counter is not compared
    unprojected = scan.unprojected
    for i, key in enumerate(scan.events.keys):
        if key is None:
            continue
        if wheres[i] & UNPROJECTED:
            applied[key] = None   # (not counted either)
        elif applies[i] and key not in unprojected:
            n = applied.get(key, 0)
            if n is not None:
                applied[key] = n + 1
    for key, value in chain((first,), counters):
        key = str(key)
        expected = applied.get(key, 0)
        if expected is None or key in unprojected:
            continue
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
