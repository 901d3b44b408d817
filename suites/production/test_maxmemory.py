"""maxmemory reached under noeviction while the backlog grows: who drops events, who holds them.

Cells and their reasoning: chaos/expectations/production.py. Every run must have had the
cap in place (XADD refused with OOM at least once), met the refusals its window counts from
(`refused`; a run whose producers finished first tested nothing: `unknown`), and lifted again.
The cap goes on while the publisher waits at its before_publish failpoint, so it meets the
publisher however late the fault's thread runs; a 600 ms row's run that dropped events in a cap that
lasted, from its first refused publish to its lifting, as long as the producer's retries (LAST_RETRY_MS)
did not have the schedule the row needs: `unknown`.
"""
from __future__ import annotations

import pytest

from chaos.cellrun import CellRun
from chaos.expectations.production import CELLS, LAST_RETRY_MS, OOM_LONG, OOM_SHORT
from chaos.expectations.table import UnknownVerdict

OOM_CELLS = [c for c in CELLS if any(f.startswith("maxmemory") for f in c.faults)]
# The long-OOM rows run at half: the cap goes on at the publisher's failpoint and holds until 75
# refusals, then duration_ms (2 s, 1 s scaled) outlasts the retries still due (the last +1 s, 0.5 s
# scaled, after events planned over 1 s, 0.5 s scaled): the same schedule, proportionally. The
# short-OOM rows keep the session's scale (s1's wrong-state rate was measured at scale 1).
# The two tests: 7.11 / 7.07 -> 3.78 / 3.78 s and 6.70 / 6.72 -> 3.43 / 3.44 s (load 4-5).
LONG_OOM_SCALE = 0.5


def refusals(outcome: CellRun, run: int) -> int:
    lifted = [v for v in outcome.fault_ops(run, "maxmemory") if v.get("step") == "lifted"]
    assert lifted, f"run {run}: the cap was never lifted; fault ops {outcome.fault_ops(run)}"
    return lifted[0]["oom_refusals"]


def held_for_cap(history: list[dict]) -> float | None:
    """Seconds the publisher waited at its before_publish failpoint while the cap went on (its
    failpoint op to its next publish), None when it never stopped there."""
    stops = [op for op in history if op["f"] == "failpoint" and (op.get("value") or {}).get("name") == "before_publish"]
    if not stops:
        return None
    stop = stops[0]
    after = [op["time"] for op in history if op["process"] == stop["process"] and op["f"] == "publish"
             and op["time"] > stop["time"]]
    return round(after[0] - stop["time"], 4) if after else None


def cap_window_s(history: list[dict]) -> float | None:
    """Seconds from the first attempt the cap refused (its invoke: the producer's retries count from
    it) to the cap's lifting (the fault's `lifted` op, written after it); None without either."""
    invoked: dict[str, float] = {}
    first = None
    for op in history:
        if op["f"] == "publish":
            if op["type"] == "invoke":
                invoked[op["event_id"]] = op["time"]
            elif first is None and op["type"] == "fail" and "OutOfMemoryError" in str((op.get("value") or {}).get("error")):
                first = invoked.get(op["event_id"], op["time"])
        elif op["f"] == "fault" and first is not None and (op.get("value") or {}).get("step") == "lifted" \
                and op["value"].get("name") == "maxmemory":
            return round(op["time"] - first, 4)
    return None


@pytest.mark.parametrize("cell", OOM_CELLS, ids=[c.test_id for c in OOM_CELLS])
def test_maxmemory_cell(cell, chaos_cell, cluster, chaos_options) -> None:
    scale = min(chaos_options.time_scale, LONG_OOM_SCALE) if OOM_LONG in cell.faults else None
    outcome = chaos_cell(cell, check=False, time_scale=scale)
    per_run = [refusals(outcome, run) for run in range(len(outcome.histories))]
    refused_publishes = [sum(1 for op in history if op["f"] == "publish" and op["type"] == "fail"
                             and "OutOfMemoryError" in str((op.get("value") or {}).get("error", "")))
                         for history in outcome.histories]
    waits = [[v for v in outcome.fault_ops(run, "maxmemory") if v.get("step") == "refused"]
             for run in range(len(outcome.histories))]
    held = [held_for_cap(history) for history in outcome.histories]
    windows = [cap_window_s(history) for history in outcome.histories]
    figures = (f"{outcome.figures()}; OOM refusals per run {per_run}; refused publishes per run {refused_publishes}; "
               f"window's clock from refusals per run {[[(v['refused'], v['wait_s']) for v in w] for w in waits]}; "
               f"publisher held for the cap per run {held} s; cap from its first refused attempt to its lifting "
               f"per run {windows} s")
    assert all(h is not None for h in held), f"a run's publisher never waited at its failpoint for the cap: {figures}"
    last_retry_s = LAST_RETRY_MS * outcome.spec.time_scale / 1000
    late = [run for run, (w, r) in enumerate(zip(windows, outcome.result.runs))
            if w is not None and w >= last_retry_s and r.counts.dropped]
    if OOM_SHORT in cell.faults and late:
        raise UnknownVerdict(f"UNKNOWN: {outcome.label}: run(s) {late} dropped events in a cap that lasted at least "
                             f"the producer's last retry ({last_retry_s} s after a first attempt) from its first "
                             f"refused attempt to its lifting: not the window shorter than the retries that the row "
                             f"needs; {figures}")
    if not all(v["reached"] for w in waits for v in w):   # the producers were done before the cap met them
        raise UnknownVerdict(f"UNKNOWN: {outcome.label}: a run's cap never met the refusals its window counts "
                             f"from (the producers finished first): it tested nothing; {figures}")
    assert all(n >= 1 for n in per_run), f"a run saw no OOM: {figures}"
    assert all(n >= 1 for n in refused_publishes), f"a run's producer was never refused: {figures}"
    print(f"{cell.test_id}: {figures}")
    outcome.check()
    assert cluster.direct_redis().config_get("maxmemory")["maxmemory"] == "0", "the cap outlived the fault"
