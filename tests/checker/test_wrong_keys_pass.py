"""The final state's pass over many keys (chaos.checker._check_final_state): past the anomalies
kept per kind, the wrong keys are counted at the end, not one by one, and the counts, the kept
anomalies (the first in event order) and the unsettled ones are what they were key by key, with
PostgreSQL's rows as a dict or as FinalRows in any order."""
from __future__ import annotations

import json
import random

from checker_histories import Ev, History, final

from chaos.checker import check_run, summarize
from chaos.results import MAX_ANOMALIES_PER_KIND, FinalRows

KEYS = 3 * MAX_ANOMALIES_PER_KIND + 5


def run() -> tuple[History, dict]:
    """KEYS keys, each an event published; every third still pending (unsettled), every fourth
    handled with its row right, the others handled and their row left at `new`."""
    h, rows, pending = History(), {}, []
    for n in range(KEYS):
        ev = Ev(f"e{n}", f"k{n}", 1, "created")
        h.publish(ev, entry_id=f"{n}-0")
        if n % 3 == 0:
            h.deliver(ev, f"{n}-0")
            pending.append({"entry_id": f"{n}-0", "stream": "orders", "event_id": ev.event_id})
        else:
            h.handle(ev, f"{n}-0")
        rows[f"k{n}"] = ("created", 1) if n % 4 == 0 else ("new", 0)
    return h, {"rows": rows, "pending": pending}


def test_wrong_keys_past_the_kept_ones_are_counted_as_key_by_key() -> None:
    h, state = run()
    result = check_run(h.ops, final(state["rows"], pending=state["pending"]))
    wrong = [n for n in range(KEYS) if n % 4]
    assert result.counts.wrong_keys == len(wrong) > MAX_ANOMALIES_PER_KIND
    assert result.counts.unsettled_keys == len([n for n in wrong if n % 3 == 0])
    assert result.anomaly_counts["wrong-final-state"] == len(wrong)
    kept = [a for a in result.anomalies if a.kind == "wrong-final-state"]
    assert [a.key for a in kept] == [f"k{n}" for n in wrong[:MAX_ANOMALIES_PER_KIND]]
    assert kept[0].key == "k1" and kept[0].detail == "expected created (v=1), final new (v=0)"
    assert kept[2].key == "k3" and kept[2].detail == "expected created (v=1), final new (v=0)" + (
        "; its highest event is still pending, undelivered or in the DLQ (unsettled: not a violation)")


def test_final_rows_in_any_order_give_the_dicts_answer() -> None:
    h, state = run()
    as_dict = final(state["rows"], pending=state["pending"])
    pairs = list(as_dict.rows.items())
    random.Random(7).shuffle(pairs)
    as_read = final(state["rows"], pending=state["pending"])
    as_read.rows = FinalRows([k for k, _ in pairs[:-2]], [row for _, row in pairs[:-2]])   # (2 keys with no row)
    as_dict.rows = dict(pairs[:-2])

    def text(state):
        return json.dumps(summarize([check_run(h.ops, state)]).to_json(preset="p", fault="f"), sort_keys=True)
    assert text(as_read) == text(as_dict)
