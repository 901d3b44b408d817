"""The transactional outbox end to end: service -> outbox -> dispatcher(s) -> stream -> consumer.

Cells and their reasoning: chaos/expectations/outbox.py. Every cell runs the real service
process, real dispatcher processes and a real consumer under the orchestrator; kill cells
must really have killed a dispatcher in every run.
"""
from __future__ import annotations

import pytest

from chaos.expectations.outbox import CELLS
from chaos.strategies.presets import PRESETS
from chaos.workload import outbox
from chaos.workload.worker import ROLES
from faults.registry import FAULTS


def _not_wired() -> list[str]:
    """The registry lines the outbox cells need (presets, worker roles, the kill-dispatcher fault) that are missing."""
    missing = [f"preset {c.preset_name}" for c in CELLS if c.preset_name not in PRESETS]
    missing += [f"worker role {r}" for r in ("outbox-producer", "dispatcher") if r not in ROLES]
    missing += ["fault kill-dispatcher"] if "kill-dispatcher" not in FAULTS else []
    return sorted(set(missing))


def test_outbox_parts_are_registered() -> None:
    """A missing registry line must fail loudly, not leave the outbox cells unrun."""
    assert not _not_wired(), "outbox parts not registered: " + ", ".join(_not_wired())


def publish_times(history: list[dict]) -> dict[str, float]:
    """event_id -> time of the dispatcher's successful XADD (the last one if sent twice)."""
    return {op["event_id"]: op["time"] for op in history
            if op["f"] == "publish" and op["type"] == "ok" and op["process"].startswith("dispatcher")}


@pytest.mark.parametrize("cell", CELLS, ids=[c.test_id for c in CELLS])
def test_outbox_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    for name in (fault.name for fault in cell.spec.faults):
        for run in range(len(outcome.histories)):
            started = [v for v in outcome.fault_ops(run, name) if v.get("phase") == "start"]
            assert started, f"run {run}: fault {name} never acted; {outcome.figures()}"
    stalls = [stall_ends(history) for history in outcome.histories]
    if "stall_until_later" in cell.preset:
        # the overtaking the row counts was forced: each run's stall ended on its condition, not its cap
        for run, ends in enumerate(stalls):
            assert ends and all(v["later_published"] >= v["until_later"] for v in ends), (
                f"run {run}: the stall did not end on {ends or 'anything'}; {outcome.figures()}")
    if "stall_until_written" in cell.preset:
        # the key's later rows were there to overtake with while it stalled, and nobody did
        for run, ends in enumerate(stalls):
            assert ends and all(v["later_written"] >= v["until_written"] and v["later_published"] == 0
                                for v in ends), f"run {run}: the stall did not end on {ends or 'anything'}; {outcome.figures()}"
    print(f"{cell.test_id}: {outcome.figures()}; stall ends per run: {stalls}")
    outcome.check()


def stall_ends(history: list[dict]) -> list[dict]:
    """The values of a run's stall-end ops (a dispatcher's stall with `until_later` or `until_written`)."""
    return [op["value"] for op in history if op["f"] == "log" and (op.get("value") or {}).get("stall") == "ended"]


def test_per_key_delays_the_failed_key_by_about_two_poll_rounds(chaos_cell, chaos_options) -> None:
    """e1-1 fails twice: it goes out at its 3rd attempt, one attempt per round, so at least
    2 poll pauses after its first try (each round's own work adds to that, more on a loaded
    machine); key 2's rows each go out at their first attempt."""
    cell = next(c for c in CELLS if c.preset == "p1-per-key" and not c.faults)
    outcome = chaos_cell(cell)
    poll_s = 0.1 * chaos_options.time_scale
    for run, history in enumerate(outcome.histories):
        relayed = [op for op in history if op["f"] == "publish" and op["process"].startswith("dispatcher")]
        first_try = min(op["time"] for op in relayed if op["event_id"] == "e1-1" and op["type"] == "invoke")
        rounds = (publish_times(history)["e1-1"] - first_try) / poll_s
        tries = {e: sum(1 for op in relayed if op["event_id"] == e and op["type"] == "invoke")
                 for e in ("e1-1", "e1-2", "e2-1", "e2-2")}
        print(f"run {run}: e1-1 out {rounds:.2f} poll intervals after its first try; attempts {tries}")
        assert tries == {"e1-1": 3, "e1-2": 1, "e2-1": 1, "e2-2": 1}, f"run {run}: {tries}"
        assert 2 <= rounds <= 30, f"run {run}: e1-1 out {rounds:.2f} poll intervals after its first try"


def test_rollback_leaves_neither_the_business_row_nor_the_outbox_row(chaos_cell, cluster) -> None:
    cell = next(c for c in CELLS if c.preset == "p1-per-key:rollback=e2-2")
    chaos_cell(cell, runs=1, fixed_runs=True)
    with cluster.pg_connect() as conn:  # the last run's database, before the next reset
        rows = {r.event_id for r in outbox.read_outbox(conn)}
        source = outbox.read_source(conn)
    assert "e2-2" not in rows and rows == {"e1-1", "e1-2", "e2-1"}, rows
    assert source["2"] == {"status": "created", "version": 1}, f"the rolled back paid must not show: {source}"
    stream = [f["event_id"] for _, f in cluster.direct_redis().xrange("orders")]
    assert "e2-2" not in stream


def test_inbox_keeps_a_relayed_twice_event_single(chaos_cell, cluster) -> None:
    """The reference: 2 stream entries of one event id, 1 inbox row, projection +1."""
    cell = next(c for c in CELLS if c.preset == "p1-inbox")
    outcome = chaos_cell(cell, runs=1, fixed_runs=True)
    (killed,) = [op["event_id"] for op in outcome.histories[0] if op["f"] == "failpoint"
                 and op.get("value", {}).get("name") == "after_xadd_before_mark"]
    entries = [f["event_id"] for _, f in cluster.direct_redis().xrange("orders")]
    with cluster.pg_connect() as conn:
        inbox_rows = conn.execute("SELECT count(*) FROM inbox WHERE event_id = %s", (killed,)).fetchone()[0]
        key = conn.execute("SELECT key FROM outbox WHERE event_id = %s", (killed,)).fetchone()[0]
        projection = conn.execute("SELECT count FROM projection WHERE key = %s", (key,)).fetchone()[0]
    assert entries.count(killed) == 2, entries
    assert inbox_rows == 1
    assert projection == 2, f"key {key}: 2 events, each applied once, projection {projection}"
