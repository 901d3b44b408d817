"""The checker's per-event records and per-key writes, kept small (part of chaos.checker).

A run of 10^6 events with a key each (bench/load_bench.py's growth run) holds a record per
event and a write per key until the final lists are folded in, so every byte here counts a
megabyte there (docs/performance.md, the 10^6 memory section):

* an `_Event`'s yes/no facts are bits of one small int (`where`): the final lists it is in,
  published ok, its latest delivery a redelivery, its write bumps no projection ... The bits
  an ordinary event sets are below 256, so that int is one of CPython's cached small ints,
  not an object per event; the invokes still open are the scan's (`_RunScan.publishing`,
  `applying`), not every record's: 12 slots (128 B) instead of 22 (208 B);
* a stream entry id is kept as an int (`entry_key`: 32 B instead of a 64 B str);
* a key's one write is its event itself (`_Writes`) when the write's time, version and id are
  the event's own (the common case: a write per handled event), not a tuple of its own.
"""
from __future__ import annotations

import sys
from typing import Any

from chaos.unknown_applies import Unknown, Unknowns

_intern = sys.intern

# The bits of `_Event.where`: the final lists it is in ...
IN_STREAM, PENDING, UNDELIVERED, OUTBOX, INTENDED = 1, 2, 4, 8, 16
NOTED = 32   # not a list: an apply `ok` of the event said effect applied or stale (see check_run's observe)
# ... and what the history said of it (an ordinary handled event's bits add up below 256)
OK = 64             # a publish of it returned ok
UNPROJECTED = 128   # its applied write said it bumps no projection (value.projection false), on its own key
RECOVERED = 256     # its earliest handling followed a redelivery after a fault started
REDELIVERED = 512   # its latest delivery was a redelivery (via claim or pending, or delivery count > 1)
INFO, FAILED, DLQ = 1024, 2048, 4096   # a publish of unknown outcome; a refused publish; it is in the DLQ
WAITING, IN_REDIS = PENDING | UNDELIVERED, IN_STREAM | PENDING | UNDELIVERED


def _bit(flag: int) -> property:
    def get(self: _Event) -> bool:
        return bool(self.where & flag)

    def put(self: _Event, on: bool) -> None:
        self.where = self.where | flag if on else self.where & ~flag
    return property(get, put)


class _Event:
    """What the history says about one event (slots: there may be 10^6 of them)."""

    __slots__ = ("eid", "key", "version", "etype", "where", "deliveries", "applied", "handled_at", "stream",
                 "entry", "entries", "unknown")

    ok, info, failed, recovered, dlq = _bit(OK), _bit(INFO), _bit(FAILED), _bit(RECOVERED), _bit(DLQ)

    def __init__(self, eid: str) -> None:
        self.eid = eid   # (the one copy of the id: the events dict's key)
        self.key = self.version = self.etype = None
        self.where = self.deliveries = self.applied = 0
        self.handled_at: float | None = None
        self.stream: str | None = None  # the first entry's stream and id
        self.entry: str | None = None
        self.entries: dict[str | None, set[str]] | None = None  # only once a second entry shows up
        self.unknown: Unknowns | None = None  # rare: kept off the slots every event pays for

    def learn(self, op: dict) -> None:
        if self.key is None and op.get("key") is not None:
            self.key = _intern(str(op["key"]))   # (10^6 events: one copy of each key and type)
        if self.version is None:
            self.version = op.get("version")
        if self.etype is None:
            etype = op.get("etype")
            self.etype = _intern(etype) if etype.__class__ is str else etype

    def add_entry(self, stream: str | None, entry_id: str | None) -> None:
        if entry_id is None:
            return
        entry_id = entry_key(entry_id)
        if self.entry is None:
            self.stream, self.entry = (stream if stream is None else _intern(stream)), entry_id
            return
        if self.entry == entry_id and (self.stream == stream or stream is None):
            return
        if self.entries is None:
            self.entries = {self.stream: {self.entry}}
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
        return bool(self.where & REDELIVERED)

    def handle(self, at: float, recovered: bool) -> None:
        """Record a handling at `at`; the earliest one decides `recovered`."""
        if self.handled_at is None or at < self.handled_at:
            self.handled_at = at
            self.recovered = recovered

    def add_unknown(self, at: float, recovered: bool) -> None:
        if self.unknown is None:
            self.unknown = Unknowns()
        self.unknown.applies.append(Unknown(at, recovered))

    def own_write(self, key: Any, order: Any, version: Any, seq: Any) -> bool:
        """Whether the write (order, version, eid, seq) on `key` is this event's own: its key, its
        first handling's time, its version, no commit sequence number (`_Writes` then keeps the
        event for it: (handled_at, version, eid, None), the same tuple again when asked)."""
        at, mine = self.handled_at, self.version   # (a version learned later would change the write: not None)
        return (seq is None and key is self.key and mine is not None and order.__class__ is at.__class__
                and order == at and version.__class__ is mine.__class__ and version == mine)

    def as_write(self) -> tuple:
        return (self.handled_at, self.version, self.eid, None)


def entry_key(entry_id: Any) -> Any:
    """A stream entry id as the records keep it: a canonical `<ms>-<seq>` (ASCII digits, no
    leading zero, seq below 10^6) as the int ms * 2^20 + seq (32 B, not a 64 B str); any other
    str as it is; anything else in a 1-tuple. One to one: equal ids give equal keys, and only
    they (an int never equals a str or a tuple)."""
    if entry_id.__class__ is not str:
        return (entry_id,)
    ms, dash, seq = entry_id.partition("-")
    if (dash and ms.isdigit() and seq.isdigit() and len(seq) < 7 and entry_id.isascii()
            and (ms[0] != "0" or ms == "0") and (seq[0] != "0" or seq == "0")):
        return int(ms) << 20 | int(seq)
    return entry_id


class _Events(dict):
    """Event id -> _Event, made on first sight (a defaultdict that hands the id to the event)."""

    def __missing__(self, eid: str) -> _Event:
        ev = self[eid] = _Event(eid)
        return ev


class _Writes(dict):
    """Key -> its effective writes, (order, version, event_id, seq) each. A key's one write is
    kept as the tuple itself, or as its event when the write is the event's own
    (`_Event.own_write`), and becomes a list at its second (10^6 keys of one write each: a
    list per key was 88 B of the checker's bytes per event, a tuple 72 B); `get` always gives a
    list of tuples."""

    def add(self, key: str, write: tuple | _Event) -> None:
        have = dict.get(self, key)
        if have is None:
            self[key] = write
        elif have.__class__ is list:
            have.append(write if write.__class__ is tuple else write.as_write())
        else:
            self[key] = [_as_tuple(have), _as_tuple(write)]

    def get(self, key: str, default: Any = None) -> Any:
        have = dict.get(self, key, default)
        if have is default or have.__class__ is list:
            return have
        return [_as_tuple(have)]


def _as_tuple(write: tuple | _Event) -> tuple:
    return write if write.__class__ is tuple else write.as_write()
