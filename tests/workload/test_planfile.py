"""A producer plan's rows through a file of the run dir (chaos/workload/planfile.py), written as
they are made and read back as they come due (chaos/workload/producer.py `Due`)."""
from __future__ import annotations

import heapq
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.events import Event
from chaos.strategies.plan import PlanRows
from chaos.workload import planfile
from chaos.workload.producer import Due

ROOT = Path(__file__).resolve().parents[2]


def _events(n: int) -> list[Event]:
    return [Event(key=f"k{i % 7}", etype="paid", event_id=f"e{i}", version=i, at_ms=float(i % 5)) for i in range(n)]


def _rows(n: int) -> list[tuple]:
    return [ev.to_row() for ev in _events(n)]


def _in_schedule(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda row: Event.from_plan(row).at_ms)   # (stable: plan order within a due time)


def test_rows_come_back_in_schedule_order_with_their_types_across_chunks(tmp_path):
    rows = _rows(2 * planfile.CHUNK + 3)
    spec = {"producer": {"name": "retrying"}, "events": rows}
    spilled = planfile.spill(spec, tmp_path / f"P{planfile.SUFFIX}")
    assert "events" not in spilled and spilled["producer"] == spec["producer"]
    assert spec["events"] is rows   # the caller's spec is not changed
    assert list(planfile.rows(spilled)) == _in_schedule(rows)
    assert list(planfile.rows(spilled)) == _in_schedule(rows)   # read again from its start (a respawn)
    planfile.remove(spilled)
    assert not (tmp_path / f"P{planfile.SUFFIX}").exists()


def test_plan_rows_are_the_rows_of_their_events_in_schedule_order(tmp_path):
    """A PlanRows spills to the same file as the list of its rows would, and the producer's
    schedule reads back the events themselves, in schedule order, inline or from the file."""
    events = _events(planfile.CHUNK + 5)
    plan_rows = PlanRows(events)
    assert len(plan_rows) == len(events) and list(plan_rows) == _in_schedule([ev.to_row() for ev in events])
    from_rows = planfile.spill({"events": [ev.to_row() for ev in events]}, tmp_path / f"A{planfile.SUFFIX}")
    from_plan = planfile.spill({"events": plan_rows}, tmp_path / f"B{planfile.SUFFIX}")
    assert (tmp_path / f"A{planfile.SUFFIX}").read_bytes() == (tmp_path / f"B{planfile.SUFFIX}").read_bytes()
    in_order = sorted(events, key=lambda ev: ev.at_ms)
    assert list(planfile.schedule(from_plan)) == in_order
    assert list(planfile.schedule({"events": [ev.to_row() for ev in events]})) == in_order


def test_a_spec_without_a_file_is_read_as_it_is(tmp_path):
    rows = _rows(3)
    dicts = [Event.from_plan(r).to_dict() for r in rows]   # the black box's inline plan
    assert list(planfile.rows({"events": dicts})) == dicts
    assert list(planfile.schedule({"events": dicts})) == sorted(map(Event.from_plan, rows), key=lambda e: e.at_ms)
    assert planfile.spill({"events": []}, tmp_path / "x") == {"events": []}
    assert not (tmp_path / "x").exists()


def test_a_file_that_cannot_be_written_keeps_the_rows_inline_as_a_list(tmp_path):
    spec = {"events": _rows(3)}
    assert planfile.spill(spec, tmp_path / "no-such-dir" / f"P{planfile.SUFFIX}") is spec
    events = _events(3)
    kept = planfile.spill({"events": PlanRows(events)}, tmp_path / "no-such-dir" / f"P{planfile.SUFFIX}")
    assert kept["events"] == _in_schedule([ev.to_row() for ev in events])
    json.dumps(kept)   # what the fork server sends (a PlanRows is not JSON)


def test_a_file_out_of_schedule_order_is_refused_by_name(tmp_path):
    path = tmp_path / f"P{planfile.SUFFIX}"
    with open(path, "wb") as fh:   # a file some other writer made, its latest row first
        pickle.dump(_in_schedule(_rows(3))[::-1], fh)
    with pytest.raises(ValueError, match=f"{path}: row 1 .* schedule order; write it with planfile.spill"):
        list(planfile.schedule({planfile.EVENTS_FILE: str(path)}))


def test_due_sends_in_the_order_of_a_heap_of_the_whole_plan(tmp_path):
    """Reading the plan as it comes due keeps the producer's order: that of one heap of every
    planned event (due, plan order) with the retries pushed after them (a retry due at the same
    time as a planned event goes after it)."""
    events = [Event(key=f"k{i}", etype="paid", event_id=f"e{i}", version=1, at_ms=float((i * 7) % 13))
              for i in range(3 * planfile.CHUNK)]
    spec = planfile.spill({"events": PlanRows(events)}, tmp_path / f"P{planfile.SUFFIX}")
    failing = {ev.event_id for ev in events[::5]}

    def sent(queue, pop, retry) -> list[tuple[str, int]]:
        out = []
        while queue:
            due, attempt, first, ev = pop()
            out.append((ev.event_id, attempt))
            if ev.event_id in failing and attempt < 3:
                retry(first + 4.0 * attempt, attempt + 1, first, ev)
        return out

    due = Due(planfile.schedule(spec))
    streamed = sent(due, due.pop, due.retry)
    whole = [(ev.at_ms, seq, 1, ev.at_ms, ev) for seq, ev in enumerate(events)]   # (the producer before Due)
    heapq.heapify(whole)
    seq = len(whole)

    def pop():
        due, _, attempt, first, ev = heapq.heappop(whole)
        return due, attempt, first, ev

    def retry(due, attempt, first, ev):
        nonlocal seq
        seq += 1
        heapq.heappush(whole, (due, seq, attempt, first, ev))
    assert streamed == sent(whole, pop, retry)
    assert len(streamed) == len(events) + 2 * len(failing)


_MEMORY = """
import json, random, sys, tempfile, tracemalloc
from pathlib import Path
from chaos.strategies.presets import resolve
from chaos.workload import planfile
from chaos.workload.producer import Due
n = int(sys.argv[1])
strategy = resolve("baseline", parts={"workload": f"bulk:jobs={n},cost_ms=0", "producer": "direct"})
tracemalloc.start()
made = strategy.workload.make_events(random.Random(0))
with tempfile.TemporaryDirectory() as tmp:
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    events = strategy.delivery.route(made)
    del made
    plans = strategy.producer.plans(events)
    spec = planfile.spill(plans[0].spec, Path(tmp) / ("P" + planfile.SUFFIX))
    plan_peak = tracemalloc.get_traced_memory()[1] - base
    del events, plans
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    due = Due(planfile.schedule(spec))
    while due:
        due.pop()
    read_peak = tracemalloc.get_traced_memory()[1] - base
print(json.dumps({"plan": plan_peak, "read": read_peak}))
"""


def _traced_peaks(n: int) -> dict[str, int]:
    """Traced peaks (bytes) over the made events of routing them, planning the producer's rows and
    spilling them (what the orchestrator does from planning to the arm), and of reading the plan
    back as the producer does; in a fresh interpreter (an xdist worker shares its interned strings
    and allocator state with the tests it ran before)."""
    out = subprocess.run([sys.executable, "-c", _MEMORY, str(n)], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_neither_side_holds_the_whole_plan():
    """Routing the events, planning a producer's rows and writing them grows by the plan's list of
    event references only (~8 B an event), reading them back not at all: per chunk, not per event.
    A list of the rows costs ~136 B an event (the arm of a9fd1aa), a route that copies every
    event ~120 B (both measured here: 141 and 120 B), the producer holding its plan ~560 B.
    20,000 and 80,000 events (5 and 20 chunks) give the slopes of 50,000 and 200,000 (plan 9.0 and
    7.9 B, read 0.07 and 0.14 B an event) for 3.3 CPU s instead of 7.3 (tracemalloc's cost)."""
    small, large = _traced_peaks(20_000), _traced_peaks(80_000)
    per_event = {side: (large[side] - small[side]) / 60_000 for side in ("plan", "read")}
    assert per_event["plan"] < 40, (per_event, small, large)
    assert per_event["read"] < 4, (per_event, small, large)
    assert large["read"] < 4 * planfile.CHUNK * 600, (large, "a few chunks of rows and their events")
