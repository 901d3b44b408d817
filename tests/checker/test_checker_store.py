"""The checker's compact records (chaos/checkstore.py): what they keep is what the tuples and
strings they replaced said, and they stay small (docs/performance.md, the 10^6 memory section)."""
from __future__ import annotations

import sys

from checker_histories import CREATED_42, PAID_42, Ev, History, final

from chaos.checker import _RunScan, check_run
from chaos.checkstore import DLQ, OK, RECOVERED, _Event, _Writes, entry_key

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


def test_an_ordinary_handled_event_is_a_small_record():
    h = History().publish(CREATED_42, entry_id="1796406132561-0").handle(CREATED_42, "1796406132561-0")
    scan = _RunScan()
    scan.scan(h.ops)
    ev = scan.events["e42-1"]
    assert ev.where < 256 and ev.where is (ev.where | 0), "its bits are one of the interpreter's cached small ints"
    assert sys.getsizeof(ev) <= 128, "12 slots: every slot more is 8 MB at 10^6 events"
    assert isinstance(ev.entry, int)
    assert scan.writes["42"] is ev, "its own write is the event itself, not a tuple"
    assert scan.writes.get("42") == [(ev.handled_at, 1, "e42-1", None)]


def test_the_flags_read_and_write_their_bits():
    ev = _Event("e1")
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
    one, two = _Event("a"), _Event("b")
    for ev, at in ((one, 1.0), (two, 2.0)):
        ev.key, ev.version, ev.handled_at = "k", 1, at
    writes = _Writes()
    writes.add("k", one)
    writes.add("k", (3.0, 2, "c", None))
    writes.add("k", two)
    assert writes.get("k") == [(1.0, 1, "a", None), (3.0, 2, "c", None), (2.0, 1, "b", None)]
    assert writes.get("nobody") is None and writes.get("nobody", []) == []
