"""A consumer SIGKILLed mid-batch: ack on receive loses the in-flight batch, ack after keeps it.

Cells: chaos/expectations/delivery.py. Each run must really have killed the consumer (the
kill-consumer:at=holding cells: once it held entries it read, which each kill's record shows).
"""
from __future__ import annotations

import pytest

from chaos.expectations.delivery import KILL_CELLS, TIME_SCALE, handed_out_not_done


@pytest.mark.parametrize("cell", KILL_CELLS, ids=[c.test_id for c in KILL_CELLS])
def test_kill_consumer_cell(cell, chaos_cell, chaos_options) -> None:
    outcome = chaos_cell(cell, check=False, time_scale=min(chaos_options.time_scale, TIME_SCALE))
    held = []
    for run in range(len(outcome.histories)):
        kills = [v for v in outcome.fault_ops(run, "kill-consumer") if v.get("phase") == "start"]
        assert kills, f"run {run}: the consumer was never killed; {outcome.figures()}"
        held.append(kills[0].get("holding"))
    c = outcome.result.counts
    print(f"{cell.test_id}: runs={outcome.result.run_count} published={c.published} handled={c.handled} "
          f"undelivered={c.undelivered} handed_out_not_done={handed_out_not_done(outcome.result)} "
          f"lost={c.lost} recovered={c.recovered} pending_left={c.pending_left}; held at the kill, per run: {held}")
    outcome.check()
