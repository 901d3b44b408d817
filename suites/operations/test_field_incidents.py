"""Field incidents: the consumer group lost with its stream, a consumer deleted with entries
pending, a job that outlives the claim idle time. Cells and their reasoning:
chaos/expectations/operations.py.

Besides each row's bounds, every run must show what happened: the fault's start op with
what vanished or was dropped, the consumers' reaction to NOGROUP per their policy, the
long job's runs overlapping in time (the checker's `duplicated` detail gives the overlap).
"""
from __future__ import annotations

import pytest

from chaos.cellrun import CellRun
from chaos.expectations import UnknownVerdict
from chaos.expectations.operations import DELETE, GROUP_LOSS, LONG_JOB
from chaos.report.rows import UNKNOWN_OUTCOME
from chaos.strategies.presets import resolve
from chaos.vanished import apply_runs


def _start(outcome: CellRun, run: int, name: str) -> dict:
    starts = [v for v in outcome.fault_ops(run, name) if v.get("phase") == "start"]
    assert starts, f"run {run}: {name} never fired; {outcome.figures()}"
    return starts[0]


def start_time(history: list[dict], name: str = "group-loss") -> float:
    return next(op["time"] for op in history if op["f"] == "fault" and op["value"].get("name") == name
                and op["value"].get("phase") == "start")


def _group_ops(history: list[dict]) -> list[dict]:
    return [op.get("value") or {} for op in history if op["f"] == "group"]


@pytest.mark.parametrize("cell", GROUP_LOSS, ids=[c.test_id for c in GROUP_LOSS])
def test_group_loss_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    if outcome.outcome == UNKNOWN_OUTCOME:
        outcome.check()   # UnknownVerdict naming why (e.g. the forced window's group never came back)
    policy = resolve(cell.preset, parts=dict(cell.parts)).delivery.on_nogroup
    for run, history in enumerate(outcome.histories):
        start = _start(outcome, run, "group-loss")
        # a publish attempt that failed (retried) or whose reply was lost (maybe in) adds no or one entry
        retried = sum(1 for op in history if op["f"] == "publish" and op["type"] in ("fail", "info")
                      and op["time"] < start_time(history))
        assert sum(start["entries"].values()) >= 10 - retried, (
            f"run {run}: the loss came before the backlog: {start['entries']}")
        reactions = _group_ops(history)
        if not reactions:   # the race the row needs did not happen: the run tested nothing
            raise UnknownVerdict(f"UNKNOWN: run {run}: no consumer met NOGROUP after the loss; {outcome.figures()}")
        if policy == "fail":
            assert {r["group"] for r in reactions} == {"gone"}, f"run {run}: {reactions}"
        else:
            made = [r for r in reactions if r["group"] == "recreated"]
            assert made and made[0]["from"] == policy.rpartition("-")[2], f"run {run}: {reactions}"
        stop = [v for v in outcome.fault_ops(run, "group-loss") if v.get("phase") == "stop"]
        if "window" in stop[0]:   # the forced schedule: the group back before the producer went on
            assert stop[0]["group_back"] or policy == "fail", f"run {run}: {stop[0]}"
            if policy.endswith("$"):   # what it skipped is what the group-less stream held (a retry aside)
                skipped = outcome.result.runs[run].anomaly_counts.get("lost", 0)
                held = len(stop[0]["window_events"])
                exact = not any(op["f"] == "publish" and op["type"] in ("fail", "info") for op in history)
                assert 1 <= skipped <= held and (skipped == held or not exact), (
                    f"run {run}: {skipped} lost after the loss, the window held {stop[0]['window_events']}")
    print(f"{cell.test_id}: {outcome.figures()}; anomalies {outcome.result.anomaly_counts}")
    outcome.check()


@pytest.mark.parametrize("cell", DELETE, ids=[c.test_id for c in DELETE])
def test_delete_consumer_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    name = cell.spec.faults[0].name
    for run in range(len(outcome.histories)):
        start = _start(outcome, run, name)
        if name == "delete-consumer":
            dropped = sum(len(ids) for ids in start["dropped_entries"].values())
            lost = outcome.result.runs[run].anomaly_counts.get("pel-dropped", 0)
            assert lost <= dropped, f"run {run}: {lost} pel-dropped but the fault dropped {dropped}: {start}"
    print(f"{cell.test_id}: {outcome.figures()}; anomalies {outcome.result.anomaly_counts}")
    outcome.check()


@pytest.mark.parametrize("cell", LONG_JOB, ids=[c.test_id for c in LONG_JOB])
def test_long_job_cell(cell, chaos_cell) -> None:
    outcome = chaos_cell(cell, check=False)
    job = cell.spec.faults[0].values.get("event_id", "")
    for run, history in enumerate(outcome.histories):
        paused = [op for op in history if op["f"] == "failpoint" and (op.get("value") or {}).get("name") == "in_work"]
        assert paused, f"run {run}: the long job never ran long; {outcome.figures()}"
        runs = apply_runs(history, {job})[job]
        claimed = [op for op in history if op["f"] == "deliver" and op.get("via") == "claim" and op.get("event_id") == job]
        during = [c for c in claimed if any(p != c["process"] and a < c["time"] < (b or float("inf"))
                                            for p, a, b in runs)]
        assert during, f"run {run}: nobody claimed {job} while a run of it was going: runs {runs}, claims {claimed}"
    duplicated = [a for a in outcome.result.anomalies if a.kind == "duplicated"]
    for anomaly in duplicated:
        if job in anomaly.examples:   # (another job may be claimed after its run, under load: no overlap)
            assert "ran twice at once" in anomaly.detail, f"no overlap given: {anomaly}"
    print(f"{cell.test_id}: {outcome.figures()}; {[a.detail for a in duplicated]}")
    outcome.check()
