"""The checker's per-event records and per-key writes, kept as columns (part of chaos.checker).

A run of 10^6 events with a key each (bench/load_bench.py's growth run) holds a record per
event and a write per key until the final lists are folded in, so every byte here counts a
megabyte there (docs/performance.md, the 10^6 memory section). The records are not an object
per event (that was 128 B of slots, with a float and an int object beside it: ~190 B) but a
row of packed columns (`_Events`): an event id maps to its row number, and each field is an
`array` of machine values, ~46 B a row:

* `where`: the event's yes/no facts as bits (the final lists it is in, published ok, its
  latest delivery a redelivery, its write bumps no projection ...);
* `deliveries`, `applied`: counts; `handled_at`: its earliest handling time (a double, NaN for
  none); `version`, `entry` (its first stream entry id, see `entry_key`): 64-bit ints; `etype`
  and `stream`: codes into a table (`table`) of the few distinct values; `key`: a list of the key strs;
* what does not fit a column (a version that is not an int, a time that is not a float, an
  entry id that is not canonical, a second entry, an apply of unknown outcome) is kept aside in
  a dict by row, rare by design.

The checker's loops read the columns (chaos/checker.py); `events[eid]` gives an `_Event`, a
view of one row with the old record's attributes, for the rare paths (unknown-outcome applies,
dangling invokes). A key's one write is its event's row number (`_Writes`) when the write's
time, version and id are the event's own (the common case: a write per handled event), not a
tuple of its own; the row number is the very int object the id maps to, so it costs nothing.
`absorb_final` folds the final state's lists (the intended events, the streams' entries, the
PEL, the undelivered tail, the outbox, the DLQ) into the records, as tuples where the source
gives them. Keys are interned: one copy of each, which PostgreSQL's final rows share (chaos.workload.schema
interns the keys it reads; 10^6 keys not interned here held a second copy of each, 56 MB).
"""
from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator
from math import isnan
from typing import Any

from chaos.results import FinalState
from chaos.unknown_applies import Unknown, Unknowns

_intern = sys.intern

# The bits of `where`: the final lists it is in ...
IN_STREAM, PENDING, UNDELIVERED, OUTBOX, INTENDED = 1, 2, 4, 8, 16
NOTED = 32   # not a list: an apply `ok` of the event said effect applied or stale (see check_run's observe)
# ... and what the history said of it
OK = 64             # a publish of it returned ok
UNPROJECTED = 128   # its applied write said it bumps no projection (value.projection false), on its own key
RECOVERED = 256     # its earliest handling followed a redelivery after a fault started
REDELIVERED = 512   # its latest delivery was a redelivery (via claim or pending, or delivery count > 1)
INFO, FAILED, DLQ = 1024, 2048, 4096   # a publish of unknown outcome; a refused publish; it is in the DLQ
WAITING, IN_REDIS = PENDING | UNDELIVERED, IN_STREAM | PENDING | UNDELIVERED

ASIDE = -(2 ** 63)   # a `version` or `entry` cell whose value is kept aside (or None: not there either)
_TOP = 2 ** 63
NAN = float("nan")   # a `handled_at` cell whose value is kept aside (or None)
BLOCK = 1024         # rows added to the columns at a time
_ZEROS, _NANS, _ASIDES = array("i", [0]) * BLOCK, array("d", [NAN]) * BLOCK, array("q", [ASIDE]) * BLOCK


class _Events:
    """Event id -> its record, kept as columns (see the module doc). Rows are added in first-
    sight order, so a row number is also the event's place in that order; `index` (id -> row)
    iterates in it. `self[eid]` gives a view of the row (made on first sight, as before)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.eids: list[str] = []
        self.keys: list[str | None] = []
        self.where = array("i")
        self.deliveries = array("i")
        self.applied = array("i")
        self.handled_at = array("d")
        self.version = array("q")
        self.entry = array("q")
        self.etype = array("i")    # 0: None; else the code of a value in `codes`
        self.stream = array("i")
        self.table: list[Any] = [None]   # code -> etype or stream (strs; anything else is kept aside)
        self.codes: dict[str, int] = {}
        self.aside: dict[str, dict[int, Any]] = {"version": {}, "entry": {}, "handled_at": {}, "etype": {}}
        self.entries: dict[int, dict[str | None, set]] = {}   # only once a second entry shows up
        self.unknown: dict[int, Unknowns] = {}

    def add(self, eid: str) -> int:
        """A new row for `eid`: its number (the int object `index` keeps). The columns grow
        by `BLOCK` rows at a time, filled with what a new row holds."""
        i = self.index[eid] = len(self.eids)
        self.eids.append(eid)
        self.keys.append(None)
        if i == len(self.where):
            for column in (self.where, self.deliveries, self.applied, self.etype, self.stream):
                column.extend(_ZEROS)
            self.handled_at.extend(_NANS)
            self.version.extend(_ASIDES)
            self.entry.extend(_ASIDES)
        return i

    def seal(self) -> list[int]:
        """The rows' numbers in first-sight order (the very int objects the id index held), the
        index dropped: no event is looked up or added by id afterwards (the checker's counting
        needs neither; at 10^6 events the index is ~41 MB, as large as the map of each key's
        highest event the counting makes)."""
        rows = list(self.index.values())
        self.index = None   # type: ignore[assignment]  (a lookup by id now fails loudly)
        return rows

    def row(self, eid: str) -> int:
        i = self.index.get(eid)
        return self.add(eid) if i is None else i

    # -- the mapping a record view is got from (rare paths; the checker's loops read the columns)
    def __getitem__(self, eid: str) -> _Event:
        return _Event(self, self.row(eid))

    def __contains__(self, eid: object) -> bool:
        return eid in self.index

    def __len__(self) -> int:
        return len(self.eids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def items(self) -> Iterator[tuple[str, _Event]]:
        for eid, i in self.index.items():
            yield eid, _Event(self, i)

    def values(self) -> Iterator[_Event]:
        for i in range(len(self.eids)):
            yield _Event(self, i)

    def count(self, flag: int) -> int:
        """How many events have `flag` set in `where` (the rows not used yet hold 0)."""
        return sum(1 for w in self.where if w & flag)

    def with_unknown(self) -> Iterator[_Event]:
        """The events with an apply of unknown outcome, in first-sight order."""
        for i in sorted(self.unknown):
            yield _Event(self, i)

    # -- the cells whose value may be kept aside
    def get_version(self, i: int) -> Any:
        return _get_int(self.version, self.aside["version"], i)

    def set_version(self, i: int, v: Any) -> None:
        _set_int(self.version, self.aside["version"], i, v)

    def get_handled_at(self, i: int) -> Any:
        t = self.handled_at[i]
        return t if t == t else self.aside["handled_at"].get(i)

    def set_handled_at(self, i: int, t: Any) -> None:
        aside = self.aside["handled_at"]
        if t.__class__ is float and not isnan(t):
            self.handled_at[i] = t
            aside.pop(i, None)
        else:
            self.handled_at[i] = NAN
            _put(aside, i, t)

    def get_entry(self, i: int) -> Any:
        return _get_int(self.entry, self.aside["entry"], i)

    def set_entry(self, i: int, e: Any) -> None:
        _set_int(self.entry, self.aside["entry"], i, e)

    def get_etype(self, i: int) -> Any:
        c = self.etype[i]
        return self.table[c] if c > 0 else self.aside["etype"].get(i)

    def set_etype(self, i: int, etype: Any) -> None:
        aside = self.aside["etype"]
        aside.pop(i, None)
        if etype.__class__ is str:
            self.etype[i] = self.code(etype)
        else:
            self.etype[i] = 0
            _put(aside, i, etype)

    def get_stream(self, i: int) -> str | None:
        return self.table[self.stream[i]]

    def set_stream(self, i: int, stream: str | None) -> None:
        self.stream[i] = 0 if stream is None else self.code(stream)

    def code(self, value: str) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.table)
            self.table.append(value)
        return c

    @staticmethod
    def key_str(key: Any) -> str:
        """`key` as a str, interned: the one copy of it."""
        return _intern(str(key))

    # -- what the record's methods did
    def learn(self, i: int, op: dict) -> None:
        """The event's key, version and etype from `op`, each where not known yet."""
        self.learn_fields(i, op.get("key"), op.get("version"), op.get("etype"))

    def learn_fields(self, i: int, key: Any, version: Any, etype: Any) -> None:
        """`learn`, from the values (None: not given)."""
        if self.keys[i] is None and key is not None:
            self.keys[i] = self.key_str(key)
        aside = self.aside
        if self.version[i] == ASIDE and i not in aside["version"]:
            if version.__class__ is int and -_TOP < version < _TOP:
                self.version[i] = version
            elif version is not None:
                aside["version"][i] = version
        if self.etype[i] == 0 and i not in aside["etype"]:
            if etype.__class__ is str:
                code = self.codes.get(etype)
                self.etype[i] = self.code(etype) if code is None else code
            elif etype is not None:
                aside["etype"][i] = etype

    def add_entry(self, i: int, stream: str | None, entry_id: Any) -> None:
        if entry_id is None:
            return
        entry_id = entry_key(entry_id)
        have = self.entry[i]
        if have == ASIDE:
            have = self.aside["entry"].get(i)
            if have is None:
                self.set_stream(i, stream)
                self.set_entry(i, entry_id)
                return
        mine = self.table[self.stream[i]]
        if have == entry_id and (mine == stream or stream is None):
            return
        entries = self.entries.get(i)
        if entries is None:
            entries = self.entries[i] = {mine: {have}}
        entries.setdefault(stream, set()).add(entry_id)

    def extra_entries(self, i: int) -> int:
        """Entries beyond one per stream; ids seen without a stream join the one known stream."""
        entries = self.entries.get(i)
        if entries is None:
            return 0
        loose = entries.get(None, set())
        named = {s: ids for s, ids in entries.items() if s is not None}
        if not named:
            return len(loose) - 1
        if len(named) == 1:
            (ids,) = named.values()
            return len(ids | loose) - 1
        known = set().union(*named.values())
        extra = sum(len(ids) - 1 for ids in named.values())
        return extra + len(loose - known)

    def handle(self, i: int, at: float, recovered: bool) -> None:
        """Record a handling at `at`; the earliest one decides `recovered`."""
        have = self.get_handled_at(i)
        if have is None or at < have:
            self.set_handled_at(i, at)
            self.where[i] = self.where[i] | RECOVERED if recovered else self.where[i] & ~RECOVERED

    def add_unknown(self, i: int, at: float, recovered: bool) -> None:
        unknown = self.unknown.get(i)
        if unknown is None:
            unknown = self.unknown[i] = Unknowns()
        unknown.applies.append(Unknown(at, recovered))

    def own_write(self, i: int, key: Any, order: Any, version: Any, seq: Any) -> bool:
        """Whether the write (order, version, eid, seq) on `key` is event `i`'s own: its key, its
        first handling's time, its version, no commit sequence number (`_Writes` then keeps the
        row for it: (handled_at, version, eid, None), the same tuple again when asked)."""
        if seq is not None or key != self.keys[i]:
            return False
        at, mine = self.handled_at[i], self.version[i]   # (a version learned later would change the write)
        if at != at:
            at = self.aside["handled_at"].get(i)
        if mine == ASIDE:
            mine = self.aside["version"].get(i)
        return (mine is not None and order.__class__ is at.__class__ and order == at
                and version.__class__ is mine.__class__ and version == mine)

    def as_write(self, i: int) -> tuple:
        return (self.get_handled_at(i), self.get_version(i), self.eids[i], None)


def _get_int(column: array, aside: dict[int, Any], i: int) -> Any:
    """A cell of an int column (`version`, `entry`): its value, or the one kept aside."""
    v = column[i]
    return v if v != ASIDE else aside.get(i)


def _set_int(column: array, aside: dict[int, Any], i: int, v: Any) -> None:
    """An int that fits goes in the column; anything else (None, a str, a huge int) aside."""
    if v.__class__ is int and -_TOP < v < _TOP:
        column[i] = v
        aside.pop(i, None)
    else:
        column[i] = ASIDE
        _put(aside, i, v)


def _put(aside: dict[int, Any], i: int, value: Any) -> None:
    if value is None:
        aside.pop(i, None)
    else:
        aside[i] = value


def _column(name: str) -> property:
    def get(self: _Event) -> Any:
        return getattr(self.store, name)[self.i]

    def put(self: _Event, value: Any) -> None:
        getattr(self.store, name)[self.i] = value
    return property(get, put)


def _cell(name: str) -> property:
    def get(self: _Event) -> Any:
        return getattr(self.store, "get_" + name)(self.i)

    def put(self: _Event, value: Any) -> None:
        getattr(self.store, "set_" + name)(self.i, value)
    return property(get, put)


def _bit(flag: int) -> property:
    def get(self: _Event) -> bool:
        return bool(self.where & flag)

    def put(self: _Event, on: bool) -> None:
        self.where = self.where | flag if on else self.where & ~flag
    return property(get, put)


class _Event:
    """A view of one event's row (`_Events[eid]`): the record's fields as attributes."""

    __slots__ = ("store", "i")

    where, deliveries, applied = _column("where"), _column("deliveries"), _column("applied")
    version, handled_at, entry, etype, stream = (_cell("version"), _cell("handled_at"), _cell("entry"),
                                                 _cell("etype"), _cell("stream"))
    ok, info, failed, recovered, dlq = _bit(OK), _bit(INFO), _bit(FAILED), _bit(RECOVERED), _bit(DLQ)

    def __init__(self, store: _Events, i: int) -> None:
        self.store, self.i = store, i

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Event) and other.store is self.store and other.i == self.i

    def __hash__(self) -> int:
        return hash(self.i)

    @property
    def eid(self) -> str:
        return self.store.eids[self.i]

    @property
    def key(self) -> str | None:
        return self.store.keys[self.i]

    @key.setter
    def key(self, key: Any) -> None:
        self.store.keys[self.i] = None if key is None else self.store.key_str(key)

    @property
    def unknown(self) -> Unknowns | None:
        return self.store.unknown.get(self.i)

    @property
    def entries(self) -> dict | None:
        return self.store.entries.get(self.i)

    def learn(self, op: dict) -> None:
        self.store.learn(self.i, op)

    def add_entry(self, stream: str | None, entry_id: Any) -> None:
        self.store.add_entry(self.i, stream, entry_id)

    def extra_entries(self) -> int:
        return self.store.extra_entries(self.i)

    def redelivered_now(self) -> bool:
        """Whether the event's latest delivery was a redelivery (claim, PEL, count > 1)."""
        return bool(self.where & REDELIVERED)

    def handle(self, at: float, recovered: bool) -> None:
        self.store.handle(self.i, at, recovered)

    def add_unknown(self, at: float, recovered: bool) -> None:
        self.store.add_unknown(self.i, at, recovered)

    def own_write(self, key: Any, order: Any, version: Any, seq: Any) -> bool:
        return self.store.own_write(self.i, key, order, version, seq)

    def as_write(self) -> tuple:
        return self.store.as_write(self.i)


def entry_key(entry_id: Any) -> Any:
    """A stream entry id as the records keep it: a canonical `<ms>-<seq>` (ASCII digits, no
    leading zero, seq below 10^6) as the int ms * 2^20 + seq (a 64-bit cell, not a 64 B str);
    any other str as it is; anything else in a 1-tuple. One to one: equal ids give equal keys,
    and only they (an int never equals a str or a tuple)."""
    if entry_id.__class__ is not str:
        return (entry_id,)
    ms, dash, seq = entry_id.partition("-")
    if (dash and ms.isdigit() and seq.isdigit() and len(seq) < 7 and entry_id.isascii()
            and (ms[0] != "0" or ms == "0") and (seq[0] != "0" or seq == "0")):
        return int(ms) << 20 | int(seq)
    return entry_id


class _Writes(dict):
    """Key -> its effective writes, (order, version, event_id, seq) each. A key's one write is
    kept as the tuple itself, or as its event's row number when the write is the event's own
    (`_Events.own_write`), and becomes a list at its second (10^6 keys of one write each: a
    list per key was 88 B of the checker's bytes per event, a tuple 72 B); `get` always gives a
    list of tuples."""

    def __init__(self, events: _Events) -> None:
        super().__init__()
        self.events = events

    def add(self, key: str, write: tuple | int) -> None:
        have = dict.get(self, key)
        if have is None:
            self[key] = write
        elif have.__class__ is list:
            have.append(write if write.__class__ is tuple else self.events.as_write(write))
        else:
            self[key] = [self.as_tuple(have), self.as_tuple(write)]

    def get(self, key: str, default: Any = None) -> Any:
        have = dict.get(self, key, default)
        if have is default or have.__class__ is list:
            return have
        return [self.as_tuple(have)]

    def as_tuple(self, write: tuple | int) -> tuple:
        return write if write.__class__ is tuple else self.events.as_write(write)


def absorb_final(events: _Events, final: FinalState) -> int:
    """Fold the final Redis/PostgreSQL lists into the events (each list read once: the stream's
    may be read in pages); returns how many intended events there are. (Read as tuples, where
    the source gives them: at 10^6 events, no dict per intended event or stream entry.)"""
    intended = 0
    index, add, where, keys, versions, etypes = (events.index, events.add, events.where, events.keys, events.version,
                                                 events.etype)
    learn, add_entry = events.learn_fields, events.add_entry   # (bound once: 10^6 intended events and as many entries)
    stream_pages = _entry_pages(final.stream_entries)   # (PagedEntries: its first pages come in meanwhile)
    # (`nxt`: the row after the last one found. The lists come in the order the history first named
    # their events, as a rule: that row is checked first, by its id, before the index is asked.)
    eids, nxt = events.eids, 0
    for eid, key, version, etype in _intended_tuples(final.events):
        if eid is not None:
            if nxt < len(eids) and eids[nxt] == eid:
                i = nxt
            else:
                i = index.get(eid)
                if i is None:
                    i = add(eid)
            nxt = i + 1
            # (else it knows them all, or the row has none to add)
            if (keys[i] is None or versions[i] == ASIDE and version is not None
                    or etypes[i] == 0 and etype is not None):
                learn(i, key, version, etype)
            w = where[i]
            intended += not w & INTENDED
            where[i] = w | INTENDED
    entry_of, stream_of, table = events.entry, events.stream, events.table
    for flag, pages in ((IN_STREAM, stream_pages), (PENDING, _entry_pages(final.pending)),
                        (UNDELIVERED, _entry_pages(final.undelivered))):
        nxt = 0
        for stream, page in pages:
            for entry_id, eid in page:
                if eid is not None:
                    if nxt < len(eids) and eids[nxt] == eid:
                        i = nxt
                    else:
                        i = index.get(eid)
                        if i is None:
                            i = add(eid)
                    nxt = i + 1
                    # (the entry the history named already, as a rule: add_entry's first test, inline)
                    if entry_of[i] != entry_key(entry_id) or not (table[stream_of[i]] == stream or stream is None):
                        add_entry(i, stream, entry_id)
                    where[i] |= flag
    row_of = events.row
    for row in final.outbox:
        if row.get("event_id") is not None:
            i = row_of(row["event_id"])
            events.learn(i, row)
            where[i] |= OUTBOX
    for entry in final.dlq:
        if entry.get("event_id") is not None:
            where[row_of(entry["event_id"])] |= DLQ
    return intended


def _intended_tuples(rows: Iterable[Any]) -> Iterable[tuple]:
    """(event_id, key, version, etype) of each intended event: as tuples where the source gives
    them (`tuples()`: chaos.workload.final_state.Intended), else from each row's dict."""
    tuples = getattr(rows, "tuples", None)
    if tuples is not None:
        return tuples()
    return ((row.get("event_id"), row.get("key"), row.get("version"), row.get("etype")) for row in rows)


def _entry_pages(entries: Iterable[Any]) -> Iterable[tuple[Any, Iterable[tuple]]]:
    """(stream, its (entry id, event id) pairs) of stream entries: pages where the source gives
    them (`pages()`: chaos.workload.final_state.PagedEntries), else an entry's dict at a time."""
    pages = getattr(entries, "pages", None)
    if pages is not None:
        return pages()
    return ((entry.get("stream"), ((entry.get("entry_id"), entry.get("event_id")),)) for entry in entries)
