"""The checker's compact records (chaos/checkstore.py): what they keep is what the tuples and
strings they replaced said, and they stay small (docs/performance.md, the 10^6 memory section)."""
from __future__ import annotations

import gc
import json
import os
import random
import subprocess
import sys
import tracemalloc
from array import array
from pathlib import Path

from checker_histories import CREATED_42, PAID_42, Ev, History, final

from chaos.checker import _RunScan, check_run
from chaos.checkstore import DLQ, OK, RECOVERED, _Events, _Writes, absorb_final, entry_key

PAID = {"42": ("paid", 2)}


def versions_of_42(ops: list[dict], **lists) -> list:
    """Key 42's applied versions as an anomaly reports them (a lost event of the key forces one)."""
    lost = History(start=ops[-1]["time"]).publish(Ev("e42-9", "42", 9, "late"), entry_id="9-0")
    result = check_run(ops + lost.ops, final(PAID, **lists))
    return next(a.versions for a in result.anomalies if a.kind == "lost")


def test_entry_keys_are_one_to_one():
    ids = ["1-0", "0-0", "1796406132561-4", "1-999999", "01-0", "1-00", "1-01", "1-1000000", "\u0661-0", "1",
           "1-", "-1", "x-1", 5, (5,)]
    keys = [entry_key(i) for i in ids]
    assert len(set(map(repr, keys))) == len(ids), "two different entry ids got the same key"
    assert all(entry_key(str(i)) == k for i, k in zip(ids, keys) if isinstance(i, str))
    assert [k.__class__ for k in keys[:4]] == [int] * 4, "canonical <ms>-<seq> ids are kept as ints"
    assert entry_key("01-0") != entry_key("1-0") and entry_key(5) != entry_key("0-5")


def test_an_event_id_seen_under_two_entry_forms_counts_one_extra_entry():
    h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0").deliver(CREATED_42, "01-0")
    assert check_run(h.ops, final({"42": ("created", 1)})).counts.duplicate_entries == 1


def test_an_ordinary_handled_event_is_a_row_of_the_columns():
    h = History().publish(CREATED_42, entry_id="1796406132561-0").handle(CREATED_42, "1796406132561-0")
    scan = _RunScan()
    scan.scan(h.ops)
    events, row = scan.events, scan.events.index["e42-1"]
    assert isinstance(events.where, array) and isinstance(events.entry, array) and isinstance(events.handled_at, array)
    assert events.entry[row] == entry_key("1796406132561-0") and not events.aside["entry"]
    assert scan.writes["42"] is row, "its own write is its row number (the int the id maps to), not a tuple"
    assert scan.writes.get("42") == [(events["e42-1"].handled_at, 1, "e42-1", None)]


def ordinary_ops(n: int, start: int = 0) -> list[dict]:
    """A growth run's ops for `n` events with a key each: published, delivered, applied."""
    ops, t = [], 1000.0 + start
    for k in range(start, start + n):
        ev = {"event_id": f"ej{k}-1", "key": f"j{k}", "version": 1, "etype": "done"}
        entry = {"entry_id": f"{1796406132561 + k // 50}-{k % 50}", "stream": "orders"}
        t += 1e-5
        ops += [{"time": t, "process": "P", "type": "invoke", "f": "publish", **ev},
                {"time": t + 1e-6, "process": "P", "type": "ok", "f": "publish", **ev, **entry},
                {"time": t + 2e-6, "process": "C1", "type": "ok", "f": "deliver", **ev, **entry, "via": "read",
                 "delivery_count": 1},
                {"time": t + 3e-6, "process": "C1", "type": "ok", "f": "apply", **ev, "rows": 1, "effect": "applied",
                 "value": {"status": "done", "projection": False}}]
    return ops


def test_the_records_are_no_object_per_event():
    """10^6 events: an object per event (the 128 B record of before, its entry id's int) is
    100+ MB; the columns hold an ordinary event's facts in ~46 B of arrays, beside its row
    number and the dict slots of its id, its key and the key's interning (~185 B). Neither new
    objects the collector tracks, nor more than 240 B an event of the scan's own allocations
    (183 in a fresh interpreter, 254 with the object records; the ops' strs and floats are the
    history's).

    Measured in a fresh interpreter: in a worker that ran other tests first, the process-wide
    table of interned strs can happen to resize inside the measured scan (327 B an event in
    one CI run), which is the test order's cost, not the store's."""
    here = Path(__file__).resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[2]), str(here.parent)])}
    done = subprocess.run([sys.executable, str(here)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    new_objects, grown = json.loads(done.stdout.splitlines()[-1])
    assert new_objects < 100, "an object per event: the records went back to objects"
    assert grown / 20000 <= 240, f"{grown / 20000:.0f} B an event"


def _measure_scan() -> tuple[int, int]:
    """New collector-tracked objects and traced bytes of scanning 20,000 ordinary events."""
    scan = _RunScan()
    scan.scan(ordinary_ops(1000))   # (the first rows, the tables and caches)
    ops = ordinary_ops(20000, start=1000)
    gc.collect()
    tracked = len(gc.get_objects())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        scan.scan(ops)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return len(gc.get_objects()) - tracked, grown


def test_a_record_round_trips_through_its_row():
    """What does not fit a column is kept aside, and each field reads back as it was written:
    its value and its type (a version or time of another type sorts and prints as before)."""
    events = _Events()
    plain, odd = events["e1"], events["e2"]
    plain.learn({"key": 7, "version": 3, "etype": "paid"})
    odd.learn({"key": "k", "version": "v2", "etype": 5})
    plain.add_entry("orders", "1796406132561-3")
    odd.add_entry(None, "not-canonical")
    plain.handle(1000.5, recovered=True)
    odd.handle(12, recovered=False)
    odd.add_unknown(11.5, recovered=True)
    plain.deliveries, plain.applied = 2, 1
    assert (plain.key, plain.version, plain.etype, plain.stream, plain.handled_at) == ("7", 3, "paid", "orders", 1000.5)
    assert plain.entry == entry_key("1796406132561-3") and plain.recovered and plain.unknown is None
    assert (plain.deliveries, plain.applied, odd.deliveries, odd.applied) == (2, 1, 0, 0)
    assert (odd.key, odd.version, odd.etype, odd.stream, odd.entry) == ("k", "v2", 5, None, "not-canonical")
    assert odd.handled_at == 12 and odd.handled_at.__class__ is int and not odd.recovered
    assert [u.at for u in odd.unknown.applies] == [11.5] and [e.eid for e in events.with_unknown()] == ["e2"]
    odd.learn({"key": "other", "version": 9, "etype": "x"})   # (known already: kept)
    assert (odd.key, odd.version, odd.etype) == ("k", "v2", 5)
    plain.add_entry("orders", "1796406132561-3")
    assert plain.extra_entries() == 0
    plain.add_entry("orders", "1796406132561-4")
    assert plain.extra_entries() == 1 and plain.entries == {"orders": {entry_key("1796406132561-3"),
                                                                          entry_key("1796406132561-4")}}
    events["e3"].version = True   # (a bool is no int here: kept aside, read back a bool)
    assert events["e3"].version is True and events["e3"].key is None and events["e3"].handled_at is None
    assert list(events) == ["e1", "e2", "e3"] and len(events) == 3 and "e2" in events


def test_the_flags_read_and_write_their_bits():
    ev = _Events()["e1"]
    ev.ok, ev.dlq = True, True
    assert (ev.ok, ev.dlq, ev.info, ev.failed, ev.recovered) == (True, True, False, False, False)
    assert ev.where == OK | DLQ
    ev.recovered, ev.dlq = True, False
    assert ev.where == OK | RECOVERED and not ev.dlq


def test_a_second_write_sorts_against_the_first_writes_own_time():
    """The key's first write is kept as its event; the second, taken before it by commit order
    (locked_at), must sort first: no reorder, versions in the order they took effect."""
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    h.handle(PAID_42, "2-0")
    paid_at = h.ops[-2]["time"]   # (its apply ok: the ack follows)
    h.deliver(CREATED_42, "1-0").apply(CREATED_42, locked_at=paid_at - 0.0005)
    result = check_run(h.ops, final(PAID))
    assert result.counts.reordered == 0
    assert versions_of_42(h.ops) == [1, 2]


def test_a_later_write_after_the_first_is_a_reorder_with_both_versions():
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    h.handle(PAID_42, "2-0").handle(CREATED_42, "1-0")
    result = check_run(h.ops, final(PAID))
    assert result.counts.reordered == 1
    assert next(a.examples for a in result.anomalies if a.kind == "reordered") == ["e42-1"]
    assert versions_of_42(h.ops) == [2, 1]


def test_a_write_without_a_version_keeps_none_when_the_version_is_learned_later():
    """The apply op names no version and the event's version comes later (the intended events):
    the write was of no version, as the tuple it replaced said."""
    h = History()
    bare = {"event_id": "e42-1", "key": "42", "etype": "created"}
    h.op("P-order", "invoke", "publish", **bare).op("P-order", "ok", "publish", **bare, entry_id="1-0", stream="orders")
    h.op("C1", "ok", "deliver", **bare, entry_id="1-0", stream="orders", via="read", delivery_count=1)
    h.op("C1", "invoke", "apply", **bare).op("C1", "ok", "apply", **bare, rows=1, effect="applied",
                                             value={"status": "created"})
    intended = [{**CREATED_42.fields}]
    assert versions_of_42(h.ops, events=intended) == [None]


def test_writes_keep_a_list_once_a_key_has_two():
    events = _Events()
    one, two = events["a"], events["b"]
    for ev, at in ((one, 1.0), (two, 2.0)):
        ev.key, ev.version, ev.handled_at = "k", 1, at
    writes = _Writes(events)
    writes.add("k", one.i)
    writes.add("k", (3.0, 2, "c", None))
    writes.add("k", two.i)
    assert writes.get("k") == [(1.0, 1, "a", None), (3.0, 2, "c", None), (2.0, 1, "b", None)]
    assert writes.get("nobody") is None and writes.get("nobody", []) == []


def test_a_sealed_store_gives_its_rows_and_no_lookups_by_id():
    """The counting seals the records (the id index dropped: its memory is the counting's map of
    each key's highest event); the rows are the very ints the writes hold, and a lookup by id
    after that fails instead of adding a new, empty record."""
    scan = _RunScan()
    scan.scan(ordinary_ops(300, start=1000))
    writes = [scan.writes[f"j{k}"] for k in range(1000, 1300)]
    rows = scan.events.seal()
    assert rows == list(range(300)) and all(r is w for r, w in zip(rows, writes))
    try:
        scan.events["ej1000-1"]
    except (AttributeError, TypeError):
        pass
    else:
        raise AssertionError("a sealed store looked an event up by id")



def _records_by_id(order: list[int]) -> dict[str, tuple]:
    """Each event's record after absorb_final, by id, with the final lists given in `order`
    (indexes into 30 published events, then 5 the history never named)."""
    scan = _RunScan()
    scan.scan(ordinary_ops(30))
    named = len(scan.events)
    ids = [f"ej{k}-1" for k in range(35)]
    entries = [{"entry_id": f"{1796406132561 + k // 50}-{k % 50}", "stream": "orders", "event_id": ids[k]}
               for k in order]
    lists = {"events": [{"event_id": ids[k], "key": f"j{k}", "version": 1, "etype": "done"} for k in order],
             "stream_entries": entries, "pending": [e for k, e in zip(order, entries) if k % 7 == 0],
             "undelivered": [e for k, e in zip(order, entries) if k % 11 == 3]}
    intended = absorb_final(scan.events, final(**lists))
    events = scan.events
    assert intended == 35 and [events.index[e] for e in ids[:named]] == list(range(named)), \
        "a named event moved to another row"
    return {e: (r.where, r.entry, r.stream, r.key, r.version, r.etype, r.extra_entries())
            for e, r in ((e, events[e]) for e in ids)}


def test_the_final_lists_in_any_order_give_each_event_the_same_record():
    """absorb_final tries the row after the last one found (the lists come in the history's order,
    as a rule) before the id index: lists in another order, or naming events the history did not,
    find the same rows and make the same records."""
    in_order = list(range(35))
    shuffled = in_order[:]
    random.Random(23).shuffle(shuffled)
    interleaved = [k for pair in zip(range(30, 35), range(5)) for k in pair] + list(range(5, 30))
    want = _records_by_id(in_order)
    assert all(r[0] & OK for e, r in want.items() if int(e[2:-2]) < 30)
    assert _records_by_id(shuffled) == want
    assert _records_by_id(interleaved) == want


if __name__ == "__main__":          # test_the_records_are_no_object_per_event's fresh interpreter
    print(json.dumps(_measure_scan()))
