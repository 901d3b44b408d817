"""Read the checker's FinalState after the drain, straight from the servers (no proxies).

Stream entries, the PEL and the undelivered tail are read per stream; an entry's event
id comes from its fields (a trimmed entry still pending has none: the checker then
relies on the history).
"""
from __future__ import annotations

import ctypes
import pickle
import queue
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import redis

from chaos.results import FinalState
from chaos.workload import schema
from chaos.workload.planfile import pickled_chunks
from chaos.events import Event


def _group(r: redis.Redis, stream: str, group: str) -> dict | None:
    try:
        return next((g for g in r.xinfo_groups(stream) if g["name"] == group), None)
    except redis.ResponseError:  # no such stream (never written, or lost with a restart)
        return None


def read_final_state(r: redis.Redis, conn: psycopg.Connection, streams: Iterable[str], group: str,
                     dlq_stream: str, events: list[Event] | Intended, *, paged: bool = False) -> FinalState:
    """With `paged`, the streams' entries and the intended events are not read into lists:
    `stream_entries` reads each stream in pages of PAGE entries while it is iterated (the
    checker does, once), `events` builds each intended event's dict as it is iterated (an
    event planned twice is given twice: the checker keeps the first), so a run of 10^6 events
    does not hold 2 x 10^6 dicts, and `projection` reads PostgreSQL's counters a page at a time
    each time its items are iterated (`PagedProjection`: the checker compares them last), and
    PostgreSQL's rows are read behind, on a connection of their own while the checker goes on
    (`schema.read_rows_behind`: their first use waits for them). PostgreSQL's rows are per key; the PEL, the undelivered tail and the DLQ are read whole
    (what is left over, not the run)."""
    final = FinalState(rows=schema.read_rows_behind(conn) if paged else schema.read_rows(conn),
                       projection=PagedProjection(conn) if paged else schema.read_projection(conn),
                       outbox=schema.read_outbox(conn))
    streams = list(streams)
    for stream in streams:
        entries = None if paged else _entry_events(r, stream)
        if entries is not None:
            final.stream_entries += [{"entry_id": eid, "stream": stream, "event_id": event}
                                     for eid, event in entries]
        info = _group(r, stream, group)
        if info is None:
            continue
        if info["pending"]:
            rows = r.xpending_range(stream, group, min="-", max="+", count=max(1, info["pending"]))
            event_of = dict(entries) if entries is not None else _events_of(r, stream, [row["message_id"] for row in rows])
            for row in rows:
                eid = row["message_id"]
                final.pending.append({"entry_id": eid, "stream": stream, "event_id": event_of.get(eid),
                                      "consumer": row["consumer"], "delivery_count": row["times_delivered"]})
        last = info["last-delivered-id"]
        tail = ([(eid, event) for eid, event in entries if _after(eid, last)] if entries is not None
                else [pair for page in _pages(r, stream, f"({last}") for pair in page])
        final.undelivered += [{"entry_id": eid, "stream": stream, "event_id": event} for eid, event in tail]
    if paged:
        final.stream_entries = PagedEntries(r, streams)
    final.dlq = [{"entry_id": eid, "event_id": (fields or {}).get("event_id")}
                 for eid, fields in r.xrange(dlq_stream)]
    intended = events if isinstance(events, Intended) else Intended(events)
    if paged:
        final.events = intended
    else:
        seen: dict[str, dict] = {}
        for row in intended:
            seen.setdefault(row["event_id"], row)
        final.events = list(seen.values())
    return final


PAGE = 10_000   # stream entries per round trip of a paged read
INTENDED_FILE = ".intended.pickle"   # where the orchestrator's check spills the intended events (run dir)


class PagedEntries:
    """The entries of `streams` as FinalState.stream_entries dicts, read PAGE at a time (a Redis
    error then is the caller's, as a read's would be). The first pass is read from the moment
    this is made, by a thread of its own (the checker folds the rest of the history meanwhile),
    each page held as two joined strs, compressed (`_packed`: ~6 B an entry; joined alone,
    ~27 B: 10^6 entries held 27 MB at the check's peak); a second pass reads the streams again."""

    def __init__(self, r: redis.Redis, streams: list[str]) -> None:
        self.r, self.streams = r, streams
        self._first: ReadAhead | None = ReadAhead(map(_packed, self._joined()), depth=0)

    def __iter__(self) -> Iterator[dict]:
        for stream, page in self.pages():
            for eid, event in page:
                yield {"entry_id": eid, "stream": stream, "event_id": event}

    def pages(self) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
        """(stream, a page of its (entry id, event id) pairs), in stream order: the checker's
        pass (no dict per entry). At 10^6 entries and load 15-30 the check waited 6.6-10 s on
        Redis for them, for 0.35 s of its own CPU."""
        first, self._first = self._first, None
        ahead = first if first is not None else ReadAhead(self._joined())
        return self._pairs(ahead)

    def _pairs(self, ahead: ReadAhead) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
        for stream, page in ahead:
            yield stream, self._split(stream, page)
        give_back()   # (the pages' strs were freed one by one into the C heap: its free pages back)

    def _joined(self) -> Iterator[tuple[str, tuple[int, str, str]]]:
        for stream in self.streams:
            for page in _joined_pages(self.r, stream):
                yield stream, page

    def _split(self, stream: str, page: tuple[int, str | bytes, str | bytes]) -> list[tuple[str, str | None]]:
        n, ids, events = page
        if isinstance(ids, bytes):   # (a page of the first pass: `_packed`)
            ids, events = zlib.decompress(ids).decode(), zlib.decompress(events).decode()
        ids_read, events_read = ids.split("\n"), events.split("\n")
        if len(events_read) != n:   # (an event id holding the separator: the page read entry by entry)
            return next(_pages(self.r, stream, ids_read[0], n))
        return [(eid, event or None) for eid, event in zip(ids_read, events_read)]


def _packed(item: tuple[str, tuple[int, str, str]]) -> tuple[str, tuple[int, bytes, bytes]]:
    """A joined page, its two strs compressed (zlib at level 1, in the reading thread: ~1 ms a page
    of 10^4 entries, without the GIL; ids 6x smaller, event ids 3-5x)."""
    stream, (n, ids, events) = item
    return stream, (n, zlib.compress(ids.encode(), 1), zlib.compress(events.encode(), 1))


class PagedProjection:
    """PostgreSQL's projection counters as FinalState.projection: `items()` reads them a page at a
    time on `conn` (the connection the final state was read on; the workers are stopped, so they
    no longer change), so a run of 10^6 keys does not hold a dict of them beside the checker's
    records (~40 MB). A read error then is the caller's, as the paged streams' is."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def items(self) -> Iterator[tuple[str, int]]:
        return schema.projection_rows(self.conn)

    def nonzero_items(self) -> Iterator[tuple[str, int]]:
        """The counters above or below 0 alone, in `items`' order (the checker's, when no event
        was applied with a projection: only these can drift)."""
        return schema.projection_rows(self.conn, nonzero=True)


class Intended:
    """The intended events as FinalState.events dicts, each built as it is iterated: from the
    planned events, or (`spill`) from a file they were written to, so that the planned events
    (~240 B each with their ids and keys) need not stay in memory beside the checker's records."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events = events
        self.path: Path | None = None

    @classmethod
    def spill(cls, events: Sequence[Event], path: Path) -> Intended:
        """The intended events written to `path` (pickled chunks of PAGE rows: every value keeps its
        type); iterating reads the file. The caller drops its events and calls `remove` when done.
        A run dir that cannot take the file (its disk full: the run is already `unknown` by the
        history it could not write) keeps the events in memory, so the check still runs."""
        out = cls(())
        out.path = Path(path)
        try:
            with open(out.path, "wb") as fh:
                chunk: list[tuple] = []
                for ev in events:
                    chunk.append((ev.event_id, ev.key, ev.version, ev.etype))
                    if len(chunk) == PAGE:
                        pickle.dump(chunk, fh, pickle.HIGHEST_PROTOCOL)
                        chunk = []
                pickle.dump(chunk, fh, pickle.HIGHEST_PROTOCOL)
        except OSError:
            out.remove()
            return cls(events)
        return out

    def __iter__(self) -> Iterator[dict]:
        if self.path is None:
            return (ev.intended() for ev in self.events)
        return self._read(self.path)

    def tuples(self) -> Iterator[tuple]:
        """(event_id, key, version, etype) of each, as `__iter__`'s dicts hold them: the
        checker's pass (no dict per event; the spilled chunks hold these very tuples)."""
        if self.path is None:
            return ((ev.event_id, ev.key, ev.version, ev.etype) for ev in self.events)
        return (row for chunk in pickled_chunks(self.path) for row in chunk)

    @staticmethod
    def _read(path: Path) -> Iterator[dict]:
        for chunk in pickled_chunks(path):
            for event_id, key, version, etype in chunk:   # (Event.intended's dict, key for key)
                yield {"event_id": event_id, "key": key, "version": version, "etype": etype}

    def remove(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


_LIBC = ctypes.CDLL(None)


def give_back() -> None:
    """The C heap's free pages handed back to the system (glibc's malloc_trim, a few ms; elsewhere
    nothing). A whole stream's pages, read before the checker folds them (~27 MB at 10^6 entries),
    are freed into the heap as they are folded, and the counting that follows would peak on top;
    the check calls it before and after (chaos.orchestrator.check): a run of 10^6 events frees
    hundreds of MB the allocator keeps for reuse, and a later run began on top of them (90 -> 167
    MB after a run of 10^5 events, 139 MB trimmed)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


MAPPED_FROM = 1 << 20   # bytes: a block this large or larger is mapped on its own (map_large_blocks)
_M_MMAP_THRESHOLD = -3  # (glibc's mallopt parameter)


def map_large_blocks() -> None:
    """Blocks of MAPPED_FROM bytes and more each mapped on their own, and given back to the system
    when freed (glibc's mallopt; elsewhere nothing). glibc's default raises that bound to the
    largest such block freed so far (up to 32 MB): the checker's records (arrays, lists and dicts
    of 10^6 items) then grew by copies inside the heap, each old copy a hole the heap kept. The
    bound is the whole process's (it cannot be undone): the orchestrator sets it when a large run
    begins (chaos.orchestrator.sequence, runs of priority.AHEAD_EVENTS or more), never on import,
    so a team's pytest process that imports the plugin keeps glibc's default. At 10^6 events
    the heap held 88 MB free at the check's peak (489 MB), 23 MB with the bound fixed (418 MB)."""
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, MAPPED_FROM)


AHEAD = 2   # pages a ReadAhead holds ready, at most (a page of 10^4 entries: ~1.7 MB); 0: no bound
_END = object()


class ReadAhead:
    """The items of `items`, read by a thread of their own up to `depth` ahead of the caller (a
    server computes the next page while the caller works on this one). An error of the read
    is raised to the caller where the read would have raised it; a caller that stops early
    (or drops this) stops the thread after the item it is reading."""

    def __init__(self, items: Iterator[Any], depth: int = AHEAD) -> None:
        self._ready: queue.Queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._done = False
        # (the thread holds the queue and the flag, not this: dropping this stops it)
        self._thread = threading.Thread(target=_read_ahead, args=(items, self._ready, self._stop),
                                        name="chaos-read-ahead", daemon=True)
        self._thread.start()

    def __iter__(self) -> ReadAhead:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        item, exc = self._ready.get()
        if item is _END:
            self._done = True
            self._thread.join()
            if exc is not None:
                raise exc
            raise StopIteration
        return item

    def close(self) -> None:
        self._stop.set()

    __del__ = close


def _read_ahead(items: Iterator[Any], ready: queue.Queue, stop: threading.Event) -> None:
    """ReadAhead's thread: each item, then the end (with the read's error, if any) into `ready`,
    until `stop` is set."""
    def put(item: tuple) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False
    try:
        for item in items:
            if not put((item, None)):
                return
        put((_END, None))
    except BaseException as exc:  # noqa: BLE001 - the caller's to handle, as a read of its own
        put((_END, exc))


# One page of entries from `start` (an id, "(id" exclusive, or "-"): ids and event ids only, not
# every field (10^5 entries cost the client ~0.5 CPU s through XRANGE, ~0.05 s so).
_PAGE_EVENTS = """local out, n = {}, 0
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])) do
  local fields, event = entry[2], false
  for i = 1, #fields, 2 do
    if fields[i] == 'event_id' then event = fields[i + 1] break end
  end
  out[n + 1], out[n + 2], n = entry[1], event, n + 2
end
return out"""


def _pages(r: redis.Redis, stream: str, start: str, count: int = PAGE) -> Iterator[list[tuple[str, str | None]]]:
    while True:
        flat = r.eval(_PAGE_EVENTS, 1, stream, start, count)
        page = [(eid, event or None) for eid, event in zip(flat[::2], flat[1::2])]
        if page:
            yield page
        if len(page) < count:
            return
        start = f"({page[-1][0]}"


# `_PAGE_EVENTS`' page as (entries, their ids joined by newlines, their event ids so joined, '' for
# none): two strs a page, not two per entry (PagedEntries holds a whole stream so).
_JOINED_PAGE = """local ids, events, n = {}, {}, 0
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])) do
  local fields, event = entry[2], ''
  for i = 1, #fields, 2 do
    if fields[i] == 'event_id' then event = fields[i + 1] break end
  end
  n = n + 1
  ids[n], events[n] = entry[1], event
end
return {n, table.concat(ids, '\\n'), table.concat(events, '\\n')}"""


def _joined_pages(r: redis.Redis, stream: str) -> Iterator[tuple[int, str, str]]:
    start = "-"
    while True:
        n, ids, events = r.eval(_JOINED_PAGE, 1, stream, start, PAGE)
        if n:
            yield n, ids, events
        if n < PAGE:
            return
        start = f"({ids.rpartition(chr(10))[2]}"


def _events_of(r: redis.Redis, stream: str, ids: list[str]) -> dict[str, str | None]:
    """Each entry id's event id (None: trimmed, or no such field), PAGE ids a round trip."""
    out: dict[str, str | None] = {}
    for i in range(0, len(ids), PAGE):
        pipe = r.pipeline(transaction=False)
        for eid in ids[i:i + PAGE]:
            pipe.eval(_PAGE_EVENTS, 1, stream, eid, 1)
        for eid, flat in zip(ids[i:i + PAGE], pipe.execute()):
            out[eid] = (flat[1] or None) if flat and flat[0] == eid else None
    return out


def _entry_events(r: redis.Redis, stream: str) -> list[tuple[str, str | None]]:
    """(entry id, its event_id field or None) of every entry of `stream`, in stream order."""
    return [pair for page in _pages(r, stream, "-") for pair in page]


def _after(entry_id: str, last: str) -> bool:
    a, _, b = entry_id.partition("-")
    c, _, d = last.partition("-")
    return (int(a), int(b or 0)) > (int(c), int(d or 0))


def fully_acked(r: redis.Redis, streams: Iterable[str], group: str) -> bool:
    """Nothing pending and nothing undelivered on any stream."""
    for stream in streams:
        info = _group(r, stream, group)
        if info is None:
            if r.exists(stream) and r.xlen(stream):
                return False
            continue
        if info["pending"]:
            return False
        last = r.xrevrange(stream, count=1)
        if last and _after(last[0][0], info["last-delivered-id"]):
            return False
    return True


def undelivered(r: redis.Redis, streams: Iterable[str], group: str) -> bool:
    """Whether any stream holds an entry the group has not delivered yet."""
    for stream in streams:
        info = _group(r, stream, group)
        last = r.xrevrange(stream, count=1)
        if last and (info is None or _after(last[0][0], info["last-delivered-id"])):
            return True
    return False


def pending_entries(r: redis.Redis, streams: Iterable[str], group: str) -> list[str]:
    """The entry ids in the group's PEL on every stream."""
    out: list[str] = []
    for stream in streams:
        info = _group(r, stream, group)
        if info is not None and info["pending"]:
            out += [row["message_id"] for row in
                    r.xpending_range(stream, group, min="-", max="+", count=info["pending"])]
    return out
