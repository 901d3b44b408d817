"""A stalled consumer's entries are claimed by another; the stalled one writes late.

Cells: chaos/expectations/redelivery.py. Each run must have stalled a consumer and
delivered its entry again through XAUTOCLAIM.

With a plain UPDATE (baseline) how many of the run's `created` writes are stale overwrites
follows from what the run did, not from a timing assumption, and is asserted exactly per run:

* the stalled consumer's late write comes after `paid`'s: stale, every run (the fault keeps it
  stopped until a consumer has committed `paid`, and holds the others' last acks until its write
  came, so the workload cannot end before it: forced, not hoped for);
* the claimer's write is stale when the claimer had applied `paid` before it claimed
  `created` (one process, one step after the other); when `paid` reached it only after the
  claim (its publish lagged created's delivery by more than claim_idle_ms: seen once at
  load ~12), the claimer wrote `created` first and that write is not stale.

The history's commit order (each write's `value.seq`) and each process's own order of ops are
the record; the checker's `reordered` for the run must equal the count they give. It can still
fail: the plain UPDATE not overwriting (a guard bug), the checker miscounting, the late write
not held back by the stall, or a write without its commit number.
"""
from __future__ import annotations

import pytest

from chaos.expectations.redelivery import CELLS

CREATED, PAID = "e42-1", "e42-2"


# The stall, the claim and the late write are the fault's conditions (the stall's floor is past the
# min-idle at any scale): the cells run at half (a 250 ms min-idle, a 300 ms floor). A claimer that got
# `paid` only after its claim writes `created` first; the per-run count below follows what it did.
XAUTOCLAIM_SCALE = 0.5


@pytest.mark.parametrize("cell", CELLS, ids=[c.test_id for c in CELLS])
def test_xautoclaim_cell(cell, chaos_cell, chaos_options) -> None:
    outcome = chaos_cell(cell, check=False, time_scale=min(chaos_options.time_scale, XAUTOCLAIM_SCALE))
    for run, history in enumerate(outcome.histories):
        phases = [v.get("phase") for v in outcome.fault_ops(run, "xautoclaim")]
        assert phases == ["start", "stop"], f"run {run}: xautoclaim ops {phases}; {outcome.figures()}"
        claims = [op for op in history if op["f"] == "deliver" and op["type"] == "ok" and op.get("via") == "claim"]
        assert claims, f"run {run}: nothing was claimed; {outcome.figures()}"
        stop = outcome.fault_ops(run, "xautoclaim")[-1]
        if stop.get("late_write") is False:
            outcome.check()   # the stalled consumer never wrote: the fault made the run unknown (UnknownVerdict)
        if cell.preset_name == "baseline":
            stalled = outcome.fault_ops(run, "xautoclaim")[0]["worker"]
            expected = stale_created_writes(history, stalled)
            measured = outcome.result.runs[run].counts.reordered
            assert measured == expected, (f"run {run}: reordered {measured}, the history's stale created writes "
                                          f"{expected}; {outcome.figures()}")
    outcome.check()
    held = [(v.get("late_write"), v.get("held"), v.get("stalled_s")) for r in range(len(outcome.histories))
            for v in outcome.fault_ops(r, "xautoclaim") if v.get("phase") == "stop"]
    print(f"{cell.test_id}: {outcome.figures()}; late write seen, acks held, stalled s per run: {held}")


def stale_created_writes(history: list[dict], stalled: str) -> int:
    """How many `created` writes of this run landed after `paid`'s (plain UPDATE: each is a stale
    overwrite). The stalled consumer's must be one of them; the claimer's is one exactly when it
    had applied `paid` before it claimed `created`."""
    applied = [op for op in history if op["f"] == "apply" and op["type"] == "ok"]
    seq = {id(op): (op.get("value") or {}).get("seq") for op in applied}
    assert all(isinstance(s, int) for s in seq.values()), f"an apply without its commit number: {applied}"
    paid = [op for op in applied if op.get("event_id") == PAID]
    assert len(paid) == 1, f"paid applied {len(paid)} times: {paid}"
    paid_seq = seq[id(paid[0])]
    late = [op for op in applied if op.get("event_id") == CREATED and seq[id(op)] > paid_seq]

    late_by = {op["process"] for op in late}
    assert stalled in late_by, f"the stalled consumer {stalled}'s created write did not land after paid: {applied}"
    claimer_ops = [op for op in history if op.get("process") == paid[0]["process"]]
    claim = next((i for i, op in enumerate(claimer_ops) if op["f"] == "deliver" and op.get("via") == "claim"
                  and op.get("event_id") == CREATED), None)
    if claim is not None:
        paid_first = claimer_ops.index(paid[0]) < claim
        assert (paid[0]["process"] in late_by) == paid_first, (
            f"{paid[0]['process']} {'applied paid before' if paid_first else 'claimed created before applying'} "
            f"paid, yet its created write {'did not land' if paid_first else 'landed'} after paid: {applied}")
    return len(late)
