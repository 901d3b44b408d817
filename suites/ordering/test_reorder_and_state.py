"""P3 (reorder buffer) and P4 (event-carried state) under real parallelism: 4 consumers in one
group on 10 orders x 5 events with 5-25 ms jobs, where the plain baseline reorders writes.

P4's rows do not exist beforehand: the first event of a key creates it (conditional upsert).
"""
from __future__ import annotations

BUSY = {"workload": "many-orders:keys=10,events=5,cost_ms=5,jitter_ms=20"}


def test_parallel_consumers_reorder_plain_writes(chaos_cell):
    cell = chaos_cell("baseline:consumers=4", runs=3, parts=BUSY, expected=False).result
    print(f"baseline x4: reordered {cell.counts.reordered}, wrong keys {cell.counts.wrong_keys}")
    assert cell.counts.reordered > 0 and cell.counts.lost == 0


def test_p3_reorder_buffer_applies_in_version_order(chaos_cell):
    cell = chaos_cell("p3:consumers=4", runs=3, parts=BUSY, expected=False).result
    c = cell.counts
    print(f"p3 x4: reordered {c.reordered}, wrong keys {c.wrong_keys}, handled {c.handled}/{c.published}")
    assert cell.verdict == "valid", (cell.unknown_reasons, c)
    assert c.handled == c.published == 50 * cell.run_count


def test_p4_state_carried_upsert_converges_without_rows(chaos_cell):
    cell = chaos_cell("p4:consumers=4", runs=3, parts=BUSY, expected=False).result
    c = cell.counts
    print(f"p4 x4: wrong keys {c.wrong_keys}, reordered {c.reordered}, handled {c.handled}/{c.published}")
    assert cell.verdict == "valid", (cell.unknown_reasons, c)  # writes ordered by value.locked_at
    assert all(row["version"] == 5 for r in cell.runs for row in r.final_state.values())
