"""The progress watch keeps a settled entry as its put-down time alone (10^6 entries: ~130 B
each, not ~330): its answers must be those of the two maps it replaced, op for op. It also
forgets an entry settled FORGET_S before a poll (every file read to its end by then), so its
per-entry state is the entries in flight, not the run's (10^6 entries: ~130 MB until the
check). Forgetting must not change an answer either: a delivery read after the forgetting is
later than the put-down, or a late op (its writer held up), passed over."""
from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

from chaos.history import HistoryWriter, dump_op, history_dir
from chaos.workload import progress
from chaos.workload.progress import ProgressWatch


class TwoMaps:
    """The watch's former per-entry state: last delivery (time, process) and last put-down."""

    def __init__(self) -> None:
        self.delivered: dict[str, tuple[float, str]] = {}
        self.put_down: dict[str, float] = {}
        self.holding: dict[str, set[str]] = {}

    def track(self, op: dict) -> None:
        entry, at, f = op["entry_id"], op["time"], op["f"]
        if f == "deliver":
            previous = self.delivered.get(entry)
            if previous is None or at > previous[0]:
                self.delivered[entry] = (at, op["process"])
                if previous is not None and previous[1] in self.holding:
                    self.holding[previous[1]].discard(entry)
                down = self.put_down.get(entry)
                if down is None or at > down:
                    self.holding.setdefault(op["process"], set()).add(entry)
            return
        down = self.put_down.get(entry)
        if down is None or at > down:
            self.put_down[entry] = down = at
        last = self.delivered.get(entry)
        if last is not None:
            if last[0] > down:
                self.holding.setdefault(last[1], set()).add(entry)
            elif last[1] in self.holding:
                self.holding[last[1]].discard(entry)


def ops(rng: random.Random, n: int, entries: int = 6) -> list[dict]:
    """Deliveries, apply completions and DLQ moves of `entries` entries by three processes, their
    times mostly rising, some late (read after newer ops of other files) and some equal."""
    out, t = [], 0.0
    for _ in range(n):
        t += rng.choice([0.0, 0.001, 0.002])
        at = t - rng.choice([0.0, 0.0, 0.0, 0.003, 0.01])
        f = rng.choice(["deliver", "deliver", "apply", "dlq"])
        kind = "ok" if f != "apply" else rng.choice(["ok", "ok", "fail", "info"])
        out.append({"time": at, "process": rng.choice(["C1", "C2", "C3"]), "type": kind, "f": f,
                    "entry_id": f"{rng.randrange(entries)}-0"})
    return out


def test_the_compact_state_answers_as_the_two_maps_did(tmp_path: Path) -> None:
    for seed in range(200):
        watch, reference = ProgressWatch(tmp_path), TwoMaps()
        for op in ops(random.Random(seed), 60):
            watch._track(op)
            reference.track(op)
            for process in ("C1", "C2", "C3"):
                assert watch.holding.get(process, set()) == reference.holding.get(process, set()), (seed, op)
                assert watch.in_hand([process]) == len(reference.holding.get(process, ())), (seed, op)


def test_a_settled_entry_is_its_put_down_time_alone(tmp_path: Path) -> None:
    watch = ProgressWatch(tmp_path)
    watch._track({"time": 1.0, "process": "C1", "type": "ok", "f": "deliver", "entry_id": "1-0"})
    assert watch.in_hand(["C1"]) == 1
    watch._track({"time": 2.0, "process": "C1", "type": "ok", "f": "apply", "entry_id": "1-0"})
    assert watch.entries == {"1-0": 2.0} and watch.in_hand(["C1"]) == 0
    watch._track({"time": 3.0, "process": "C2", "type": "ok", "f": "deliver", "entry_id": "1-0"})
    assert watch.in_hand(["C2"]) == 1, "delivered again after its put-down: in C2's hand"


def test_forgetting_what_every_file_has_passed_changes_no_answer(tmp_path: Path) -> None:
    forgot = 0
    for seed in range(200):
        rng = random.Random(seed)
        history = ops(rng, 300, entries=40)
        watch, reference = ProgressWatch(tmp_path), TwoMaps()
        for n, op in enumerate(history):
            watch._track(op)
            reference.track(op)
            if rng.random() < 0.2:   # a poll: every op older than the ones still to come was read
                before = len(watch.entries)
                watch.settled.forget(min((o["time"] for o in history[n + 1:]), default=float("inf")), watch.entries)
                forgot += before - len(watch.entries)
            for process in ("C1", "C2", "C3"):
                assert watch.holding.get(process, set()) == reference.holding.get(process, set()), (seed, n)
                assert watch.in_hand([process]) == len(reference.holding.get(process, ())), (seed, n)
    assert forgot > 1000, "the test forgot (almost) nothing: it shows nothing"


def test_a_poll_forgets_settled_entries_and_keeps_those_in_hand(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(progress, "FORGET_S", 0.0)   # (forget what was settled before the poll began)
    with HistoryWriter.for_run(tmp_path, "C1") as c1:
        for n in range(100):
            c1.op("ok", "deliver", event_id=f"e{n}", entry_id=f"{n}-0", via="read")
            c1.op("invoke", "apply", event_id=f"e{n}", entry_id=f"{n}-0")
            if n % 10:
                c1.op("ok", "apply", event_id=f"e{n}", entry_id=f"{n}-0", effect="applied")
        watch = ProgressWatch(tmp_path)
        watch.poll()
        assert watch.in_hand(["C1"]) == 10 and watch.handled == 90
        assert len(watch.entries) == 10, "the settled entries are still held"
        c1.op("ok", "deliver", event_id="e1", entry_id="1-0", via="claim")   # delivered again: in hand
        late = {"time": 0.5, "process": "C2", "type": "ok", "f": "deliver", "event_id": "e2", "entry_id": "2-0",
                "via": "read"}   # (stamped long before the poll that forgot its entry: its writer held up)
        (history_dir(tmp_path) / "C2.jsonl").write_bytes(dump_op(late))
        watch.poll()
        assert watch.in_hand(["C1"]) == 11 and "2-0" not in watch.entries


def test_a_settled_entry_costs_the_watch_a_slot_not_an_object(tmp_path: Path) -> None:
    """What the watch adds for a settled entry, beyond its id and put-down time (made by the
    parse): a slot in `entries` and two in the put-down queue, no tuple each (37 B an entry here,
    84 with one; a lagging watch held 400k settled entries at 10^6 events)."""
    n = 20_000
    history = []
    for i in range(n):
        entry = f"{1796369323947 + i}-0"
        history.append({"time": i * 1e-4, "process": "C1", "type": "ok", "f": "deliver", "entry_id": entry})
        history.append({"time": i * 1e-4 + 5e-5, "process": "C1", "type": "ok", "f": "apply", "entry_id": entry})
    watch = ProgressWatch(tmp_path)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for op in history:
            watch._track(op)
        added = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(watch.entries) == len(watch.settled) == n and watch.in_hand(["C1"]) == 0
    assert added / n < 60, f"{added / n:.0f} B a settled entry"
