"""`faultthreads.acting`, the one "faults act while this runs" of both runners: the
orchestrator stops its faults when the workload ends, the black box lets them run their
course; a run cut short (an exception, Ctrl-C, a broken rig) stops them first, heals within
the cut bound and hands a fault's failure on only when asked. Real fault threads, no servers:
each fault here waits on the run's stop event, so what it saw tells which order was kept."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from chaos.orchestrator.faultthreads import FaultSchedule, acting
from faults.interface import Fault, FaultError
from faults.local import LocalContext

LONG_S = 60.0      # a fault that is not stopped waits this long: far past any bound below


class Waits(Fault):
    """Waits for the run's stop event (at most `course_s`); records whether it was stopped."""

    name = "test-waits"
    description = "waits on the stop event"
    course_s = LONG_S
    heal_fails = False

    def run(self, ctx: Any) -> None:
        self.stopped = ctx.stop_event.wait(self.course_s)

    def heal(self, ctx: Any) -> None:
        if self.heal_fails:
            raise FaultError("heal refused on purpose")


def schedule_of(ctx: LocalContext) -> tuple[FaultSchedule, list[str]]:
    failures: list[str] = []
    return FaultSchedule(ctx, lambda fault, exc: failures.append(f"{fault.name}: {exc}")), failures


def test_without_run_course_the_faults_stop_when_the_block_ends() -> None:
    ctx = LocalContext(None)
    schedule, failures = schedule_of(ctx)
    fault = Waits()
    with acting(schedule, ctx.stop_event, lambda: LONG_S):
        schedule.start([fault])
    assert fault.stopped is True, "the stop event was set before the fault was joined"
    assert failures == []


def test_with_run_course_each_fault_ends_on_its_own_before_the_stop_event() -> None:
    ctx = LocalContext(None)
    schedule, failures = schedule_of(ctx)
    fault = Waits()
    fault.course_s = 0.05
    with acting(schedule, ctx.stop_event, lambda: LONG_S, run_course=True):
        schedule.start([fault])
    assert fault.stopped is False, "the fault ran its course: the stop event came only after its join"
    assert ctx.stop_event.is_set() and failures == []


@pytest.mark.parametrize("report_cut", [False, True])
@pytest.mark.parametrize("how", ["exception", "cut"])
def test_a_cut_run_stops_the_faults_first_and_reports_only_when_asked(how: str, report_cut: bool) -> None:
    ctx = LocalContext(None)
    schedule, failures = schedule_of(ctx)
    fault = Waits()
    fault.heal_fails = True
    bounds: list[str] = []
    phases: list[str] = []

    class Healing:
        def __enter__(self) -> None:
            phases.append("heal")

        def __exit__(self, *exc: Any) -> None:
            phases.append("healed")

    def normal() -> float:
        bounds.append("normal")
        return LONG_S

    def cut() -> float:
        bounds.append("cut")
        return LONG_S

    def body() -> None:
        with acting(schedule, ctx.stop_event, normal, run_course=True, cut_bound_s=cut, report_cut=report_cut,
                    healing=Healing):
            schedule.start([fault])
            if how == "exception":
                raise KeyboardInterrupt
            schedule.cut = True       # a runner's broken rig

    if how == "exception":
        with pytest.raises(KeyboardInterrupt):
            body()
    else:
        body()
    assert fault.stopped is True, "cut short, the faults stop at once, run_course or not"
    assert bounds == ["cut"] and phases == ["heal", "healed"]
    assert failures == (["test-waits: heal refused on purpose"] if report_cut else [])


def test_the_stop_event_is_the_one_given() -> None:
    """(The orchestrator passes its run's event, the black box its LocalContext's.)"""
    ctx = LocalContext(None)
    schedule, _ = schedule_of(ctx)
    other = threading.Event()
    fault = Waits()
    fault.course_s = 0.05
    with acting(schedule, other, lambda: LONG_S):
        schedule.start([fault])
    assert other.is_set() and not ctx.stop_event.is_set() and fault.stopped is False
