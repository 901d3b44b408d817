"""Failover as production does it: Redis Sentinel detects, elects and promotes by itself.

Every run must really have been failed over by Sentinel, and the workers must have found
the new primary by asking Sentinel (their histories record what Sentinel told them).
Cells and their reasoning: chaos/expectations/sentinel.py (CI_CELLS here; the rest run
nightly through `python -m chaos matrix --area sentinel --topology sentinel`).
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chaos.cellrun import CellRun
from chaos.expectations.sentinel import CI_CELLS, FAULT_NAME, HELD, PARTITION, REPLAY_5433


def promotion(outcome: CellRun, run: int) -> tuple[float, dict]:
    """(when, what) of the run's promotion; fails the test if Sentinel never promoted."""
    ops = [op for op in outcome.histories[run] if op["f"] == "fault" and op["value"].get("name") == FAULT_NAME]
    stops = [op for op in ops if op["value"].get("phase") == "stop"]
    assert stops and stops[0]["value"].get("failed_over"), (
        f"NO SENTINEL FAILOVER in run {run} of {outcome.cell.test_id}: fault ops {outcome.fault_ops(run)}")
    stop = stops[0]["value"]
    acted = [op["time"] for op in ops if op["value"].get("phase") == "info" and op["value"].get("step") == stop["mode"]]
    return acted[0] + stop["promote_s"], stop


def told(outcome: CellRun, run: int) -> set[str]:
    """Every primary address Sentinel gave the workers in a run."""
    return {op["value"]["master"] for op in outcome.histories[run] if op["f"] == "sentinel"}


def read_again(outcome: CellRun, run: int, at: float) -> int:
    """Events delivered before the promotion and delivered again through `>` after it."""
    history = outcome.histories[run]
    before = {op["event_id"] for op in history if op["f"] == "deliver" and op["type"] == "ok" and op["time"] < at}
    return sum(1 for op in history if op["f"] == "deliver" and op["type"] == "ok" and op["time"] >= at
               and op.get("via") == "read" and op.get("event_id") in before)


def client_errors(outcome: CellRun, run: int) -> Counter:
    """What the producer saw: its failed or unknown publishes, by error type."""
    return Counter(str((op.get("value") or {}).get("error", "?")).split(":")[0]
                   for op in outcome.histories[run] if op["f"] == "publish" and op["type"] in ("fail", "info"))


def cell_id(cell) -> str:
    """The preset and what the fault adds to the rows' shared start (s5, s1|mode=manual,until=...)."""
    short = cell.test_id
    for start in (PARTITION, HELD):
        short = short.replace(start, "")
    return short.rstrip("|,").replace("|,", "|") or cell.test_id


@pytest.mark.parametrize("cell", CI_CELLS, ids=[cell_id(c) for c in CI_CELLS])
def test_sentinel_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    runs = range(len(outcome.histories))
    stops = [promotion(outcome, run) for run in runs]
    timings = [{k: v.get(k) for k in ("detect_s", "promote_s", "fenced_s", "demote_s", "acked_after_sync",
                                      "acked_after_heal", "took_back")
                if k in v} for _, v in stops]
    again = [read_again(outcome, run, at) for run, (at, _) in zip(runs, stops)]
    figures = (f"{outcome.figures()}; per run: {timings}; read again through > {again}; "
               f"producer saw {[dict(client_errors(outcome, run)) for run in runs]}")
    for run, (_, stop) in zip(runs, stops):
        assert stop["new_primary_address"] in told(outcome, run), (
            f"run {run}: no worker was told the new primary {stop['new_primary_address']} by Sentinel "
            f"(told {told(outcome, run)}): {figures}")
    for run, (_, stop) in zip(runs, stops):
        if stop.get("fenced_s") is not None:
            # the fenced old primary refused every write from the heal to its demotion (NOREPLICAS)
            assert stop["acked_after_heal"] == 0, f"run {run}: the fenced old primary took writes: {figures}"
    if cell is REPLAY_5433:
        # redis/redis#5433: entries read and acknowledged on the old primary come back as NEW entries
        assert sum(again) >= 1, f"no acknowledged entry came back through >: {figures}"
    print(f"{cell.test_id}: {figures}")
    outcome.check()


def test_a_failover_after_the_workload_ended_makes_the_run_unknown(chaos_reset_cluster) -> None:
    """s1's two events are acked long before the primary is cut: the failover met no work in
    flight (its declared effect, faults/effects.py), so the run tested nothing and is unknown.
    "After the workload" is a condition (faults.helpers.once_settled: both events read and acked),
    then at_ms as before: the 750 ms alone fell inside a loaded run's workload once (beside two
    CPU hogs, load ~18: the cut met work in flight, verdict invalid). Sentinel's election does not
    follow the run's time scale: at 0.25 its 15 s limit was 3.8 s, and a loaded Sentinel had not
    promoted by then (load ~15: elected 2.6 s after the cut); 25 s at 0.5 gives it 12.5 s."""
    from chaos.run import run_cell
    from faults.helpers import once_settled
    from faults.registry import get_fault
    fault = once_settled(get_fault(f"{FAULT_NAME}:after_entries=1,at_ms=1500,elect_timeout_ms=25000"), events=2)
    cell = run_cell(chaos_reset_cluster, "s1", [fault], runs=1, time_scale=0.5, keep_runs="never")
    assert cell.verdict == "unknown", (cell.verdict, cell.unknown_reasons)
    assert any(f"fault {FAULT_NAME} missed the workload" in r for r in cell.unknown_reasons), cell.unknown_reasons


def pinned_writer_failover(cluster: Any, fence: bool) -> tuple[list[str], Counter, dict]:
    """A partition failover with rejoin while a writer pinned to the old primary's address (a
    client told it just before the switch) writes every 5 ms throughout: (its acknowledged writes
    the new primary does not hold, its refusals by kind, the fault's stop record)."""
    from faults.local import FaultThread, LocalContext
    from faults.registry import get_fault
    old = cluster.node_address(cluster.primary_id())
    writer = redis.Redis(host=old.host, port=old.port, socket_timeout=0.5, socket_connect_timeout=0.5,
                         decode_responses=True, protocol=2, retry=Retry(NoBackoff(), 0))
    acked: list[str] = []
    refused: Counter = Counter()
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            try:
                acked.append(writer.xadd("pinned", {"n": len(acked)}))
            except redis.ReadOnlyError:            # demoted
                refused["READONLY"] += 1
            except redis.ResponseError as exc:     # NOREPLICAS (fenced)
                refused[str(exc).split(" ", 1)[0]] += 1
            except redis.RedisError as exc:        # the cut (connection refused or reset)
                refused[type(exc).__name__] += 1
            time.sleep(0.005)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    ctx = LocalContext(cluster)
    try:
        with FaultThread(get_fault(f"{FAULT_NAME}:after_entries=0,at_ms=200,fence={int(fence)}"), ctx):
            pass
    finally:
        stop.set()
        thread.join(5)
        writer.close()
    kept = {entry for entry, _ in cluster.direct_redis("primary").xrange("pinned")}
    return [e for e in acked if e not in kept], refused, ctx.ops[-1]["value"]


def test_a_writer_told_the_old_address_loses_nothing_to_the_fenced_old_primary(chaos_reset_cluster) -> None:
    """Redis Sentinel's split brain after a partition, forced: the cut heals while the old primary
    is still a primary (Sentinel demotes it up to a second later under load) and a writer pinned to
    its address is there to write. Fenced (the default), it refuses every write from the heal to its
    demotion, so every write it acknowledged is on the new primary. (Unfenced, `fence=0`, the same
    writer's writes in that window are acknowledged and dropped: docs/failover.md.)"""
    lost, refused, stop = pinned_writer_failover(chaos_reset_cluster, fence=True)
    timings = {k: stop.get(k) for k in ("promote_s", "switched_s", "fenced_s", "demote_s", "acked_after_heal")}
    figures = f"lost {len(lost)}, refused {dict(refused)}, fault {timings}"
    assert stop.get("fenced_s") is not None, f"the old primary was never fenced: {figures}"
    assert not lost and stop["acked_after_heal"] == 0, f"the fenced old primary took writes: {figures}"
    print(figures)


def test_sentinels_starved_into_tilt_still_fail_over(chaos_reset_cluster) -> None:
    """A starved machine puts the Sentinels in TILT (their timer ran over 2 s late): they do not
    act until tilt-period passes without another late tick. A loaded run had all three enter TILT
    mid-failover and, with Redis's 30 s period, none promoted within the fault's 15 s: FaultError,
    the test failed. Forced here: every Sentinel stopped 2.3 s (SIGSTOP), then the partition at
    once, with a 2.5 s election limit. Now tilt-period is 3 s (chaos/cluster/sentinels.py) and the
    fault's wait gives Sentinels in TILT that long more, once (and names TILT if they still do
    not act: the rig's failure, not the failover's). Before: FaultError, no promotion in 2.5 s."""
    import os
    import signal

    from chaos.cluster.sentinels import in_tilt
    from faults.local import FaultThread, LocalContext
    from faults.registry import get_fault
    from faults.sentinel_failover import TiltLimit
    cluster = chaos_reset_cluster
    pids = [p.pid for p in cluster.sentinel_procs]
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(2.3)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 2
    while len(in_tilt(cluster.sentinel_clients())) < len(pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    tilted = in_tilt(cluster.sentinel_clients())
    assert len(tilted) == len(pids), f"the stop did not put every Sentinel in TILT: {tilted}"
    ctx = LocalContext(cluster)
    fault = get_fault(f"{FAULT_NAME}:after_entries=0,at_ms=0,rejoin=0,elect_timeout_ms=2500")
    with FaultThread(fault, ctx):
        pass
    stop = ctx.ops[-1]["value"]
    assert stop.get("failed_over") and stop.get("tilt_waited_s"), stop
    print({k: stop.get(k) for k in ("detect_s", "promote_s", "tilt_waited_s", "sentinel_events")})
    # Sentinels that stay in TILT (every tick late: tilt-trigger 1 ms): a wait past its limit is
    # moved once, then ends naming TILT as the rig's failure. (The next reset restarts them.)
    for client in cluster.sentinel_clients():
        client.execute_command("SENTINEL", "DEBUG", "tilt-trigger", 1)
    while len(in_tilt(cluster.sentinel_clients())) < len(pids) and time.monotonic() < deadline + 10:
        time.sleep(0.01)
    limit = TiltLimit(fault, cluster, time.monotonic() - 1)
    assert not limit.passed(), "a wait past its limit with Sentinels in TILT was not given their TILT period"
    limit.deadline = time.monotonic() - 1
    assert limit.passed() and "the rig could not act, not the system under test" in limit.tilt_text(), \
        limit.tilt_text()
