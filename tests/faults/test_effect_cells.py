"""A fault that misses the workload makes a real run `unknown`, naming the fault.

Each fault below fires after s1's short workload is done (or selects nothing of it): its
declared effect (faults/effects.py) is missing from the history, so the run tested nothing.
The cells where each effect is met are the suites' rows (suites/*): a row's run whose fault
missed would be `unknown` and leave its expectation. sentinel-failover's miss is tested on
its own topology (suites/sentinel/test_sentinel_failover.py).

"After the workload is done" is a condition, not a time: each timed fault here first waits
until the workload's streams hold all of s1's events and every group has read and acked them
all (faults.helpers.once_settled), then waits its at_ms (750 ms at scale 0.25) as before. The
750 ms alone could fall inside a workload a loaded machine had not finished, and the fault then
met it; acting at once instead raced the orchestrator's own drain and stop of the workers.
"""
from __future__ import annotations

import pytest

from chaos.run import run_cell
from faults.helpers import once_settled
from faults.registry import get_fault

LATE = "after_entries=1,at_ms=3000"
EVENTS = 2   # s1's workload: created and paid of order 42
MISSES = [
    ("s1", "pause:at_ms=3000,duration_ms=300"),
    ("s1", f"maxlen-trim:{LATE},maxlen=0"),          # trims only acked entries
    ("s1", f"delete-consumer:{LATE},when=alive"),     # the consumer holds nothing any more
    ("s1", f"group-loss:{LATE}"),
    ("s1", f"replica-overflow:{LATE}"),                 # the primary killed with every event acked
    ("s1", "poison:event_id=no-such-event"),          # selects no event of the workload
    ("s5:claim=always,claim_idle_ms=300", "xautoclaim:at=time,at_ms=3000,stall_ms=600"),
    ("s5:claim=always,claim_idle_ms=300", "long-job:event_id=no-such-event,duration_ms=600"),
]
TIMED = ("pause", "maxlen-trim", "delete-consumer", "group-loss", "replica-overflow", "xautoclaim")


@pytest.mark.parametrize("preset, spec", MISSES, ids=[s.partition(":")[0] for _, s in MISSES])
def test_a_fault_that_missed_the_workload_makes_the_run_unknown(cluster, preset, spec):
    name = spec.partition(":")[0]
    fault = once_settled(get_fault(spec), EVENTS) if name in TIMED else spec
    cell = run_cell(cluster, preset, [fault], runs=1, time_scale=0.25, keep_runs="never")
    assert cell.verdict == "unknown", (cell.verdict, cell.unknown_reasons, cell.counts,
                                       [(a.kind, a.detail) for a in cell.anomalies])
    assert any(f"fault {name} missed the workload" in r for r in cell.unknown_reasons), cell.unknown_reasons
