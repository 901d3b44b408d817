"""Liveness of the built-in presets: consumers that stay alive, reachable and healed, yet
stop consuming, leave a run `invalid` with a `stopped-consuming` count, not `unknown`.

Real redis-server and PostgreSQL (through the workers' proxies), real worker processes
from the fork server, preset s5 (two consumers, CAS). The stall is a failpoint: each consumer's fourth job hangs in its
work (`in_work`, action pause, far longer than the run), as a job stuck on a lock or a
call without a timeout does. Nothing of the rig's stands in the way (no fault, the
producer done), so what waits in Redis at the drain's end was left by the consumers.
"""
from __future__ import annotations

import json
import shutil

from chaos.history import read_history
from chaos.run import run_cell

WORKLOAD = "many-orders:keys=10,events=3,gap_ms=5"       # 30 events
HANG = {"consumer": {"in_work": {"action": "pause", "pause_ms": 600_000, "after": 3}}}


def test_consumers_that_hang_alive_stop_consuming(cluster):
    cell = run_cell(cluster, "s5", runs=1, time_scale=0.2, workload_bound_s=0.5, stall_s=1.0,
                    parts={"workload": WORKLOAD}, failpoints=HANG, keep_runs="always")
    run = cell.runs[0]
    assert cell.verdict == "invalid", (cell.verdict, cell.unknown_reasons)
    assert run.drain_end == "timed out"
    # both consumers hold one hung job each; the other 22 or so events wait undelivered
    assert 20 <= cell.counts.stopped_consuming <= 28, cell.counts
    print(f"stopped_consuming {cell.counts.stopped_consuming}, pending_left {cell.counts.pending_left}, "
          f"undelivered {cell.counts.undelivered}, handled {cell.counts.handled}")
    assert cell.counts.stopped_consuming == run.anomaly_counts["stopped-consuming"]
    assert cell.counts.lost == 0 and cell.counts.unsettled_keys == 0, cell.counts
    reason = " ".join(cell.unknown_reasons)
    assert "consumers C1, C2 were live" in reason, reason
    ends = [op["value"] for op in read_history(cell.run_dirs[0])
            if op.get("f") == "log" and op.get("value", {}).get("phase") == "drain-end"]
    assert ends and ends[0]["live_consumers"] == ["C1", "C2"], ends
    data = json.loads(json.dumps(cell.to_json()))
    assert data["stopped_consuming"] == data["per_run"][0]["stopped_consuming"] == cell.counts.stopped_consuming
    assert data["per_run"][0]["live_workers"] == ["C1", "C2"] and data["per_run"][0]["drain_end"] == "timed out"
    shutil.rmtree(cell.run_root)     # kept to read its history; a failed assertion leaves it to look at


def test_a_consumer_stopped_and_resumed_by_a_fault_is_live(cluster):
    """The control: the pause fault stops C1 for a second (scaled) and heals; the consumers
    catch up, the run is valid and nothing is counted as stopped consuming."""
    cell = run_cell(cluster, "s5", ["pause:target=C1,at_ms=50,duration_ms=1000"], runs=1, time_scale=0.2,
                    parts={"workload": WORKLOAD})
    assert cell.verdict == "valid", cell.unknown_reasons
    assert cell.counts.stopped_consuming == 0 and cell.counts.handled == 30, cell.counts
    assert cell.runs[0].live_workers == [] and cell.runs[0].drain_end != "timed out"
