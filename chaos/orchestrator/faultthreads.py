"""The faults of one run, started together and joined and healed together: the one fault
schedule of both runners (the orchestrator's phases and the black-box session). A runner
gives the fault context (how its workers are found and its fault ops recorded) and where a
fault's failure goes; arming, the heal bound and the failure's text are decided here once."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chaos.orchestrator.workers import RunAborted

RIG_JOIN_S = 5.0            # how long a fault thread may take to wind down once the rig failed


def heal_bound_s(time_scale: float, rig_failed: bool) -> float:
    """How long a fault's thread may still run before it is healed anyway (and named hung)."""
    return RIG_JOIN_S if rig_failed else max(10.0, 60 * time_scale)


def failure_text(fault: Any, exc: BaseException) -> str:
    """The reason a fault that did not act or heal gives (verdict unknown)."""
    return f"fault {fault.name} did not act or heal: {type(exc).__name__}: {exc}"


class FaultSchedule:
    """Arm and start the faults (`start`), later join and heal each (`heal`); every failure
    is handed to `failed(fault, exc)`, which makes the run's verdict unknown."""

    def __init__(self, ctx: Any, failed: Callable[[Any, BaseException], None]) -> None:
        self.ctx, self.failed = ctx, failed
        self.threads: list[Any] = []
        self.cut = False        # the run was cut short (see `acting`)

    def start(self, faults: list[Any]) -> None:
        """Arm and start each fault in order. One that cannot be armed is healed (what it did
        undone) and ends the run: RunAborted (the ones started before it are healed by `heal`)."""
        from faults.local import FaultThread

        for fault in faults:
            thread = FaultThread(fault, self.ctx)
            try:
                thread.start()
            except Exception as exc:  # noqa: BLE001 - could not arm: heal what it did, verdict unknown
                self.failed(fault, exc)
                try:
                    fault.heal(self.ctx)
                except Exception as heal_exc:  # noqa: BLE001
                    self.failed(fault, heal_exc)
                raise RunAborted(f"fault {fault.name} could not be armed") from exc
            self.threads.append(thread)

    def heal(self, bound_s: Callable[[], float], *, report: bool = True) -> None:
        """Wait for each fault's thread (at most `bound_s()`, asked per fault: a rig that fails
        meanwhile shortens the wait), then heal it (FaultThread.join always heals). With
        `report` False a failure is not handed on (the run is already lost to a broken rig)."""
        for thread in self.threads:
            try:
                thread.join(timeout_s=bound_s())
            except Exception as exc:  # noqa: BLE001 - FaultError and anything else: verdict unknown
                if report:
                    self.failed(thread.fault, exc)


@contextmanager
def acting(schedule: FaultSchedule, stop_event: threading.Event, bound_s: Callable[[], float], *,
           run_course: bool = False, cut_bound_s: Callable[[], float] | None = None,
           report_cut: bool = True, healing: Callable[[], Any] | None = None) -> Iterator[FaultSchedule]:
    """The faults act while the body runs (the body calls ``schedule.start(faults)`` at its
    moment); leaving it, each is joined (at most ``bound_s()``) and healed, inside ``healing()``
    (the heal phase) when given.

    * The body ends normally: with ``run_course`` each fault runs its course first and
      ``stop_event`` is set after (the black box); without, ``stop_event`` is set first, so the
      faults stop when the workload ends (the orchestrator).
    * The body is cut short (an exception, Ctrl-C, or ``schedule.cut`` set by the runner for a
      broken rig): ``stop_event`` first, the bound ``cut_bound_s`` (default ``bound_s``), and a
      fault's failure handed on only with ``report_cut``; the exception goes on.
    """
    schedule.cut = False
    try:
        yield schedule
    except BaseException:
        schedule.cut = True
        _heal(schedule, stop_event, bound_s, False, cut_bound_s, report_cut, healing)
        raise
    _heal(schedule, stop_event, bound_s, run_course, cut_bound_s, report_cut, healing)


def _heal(schedule: FaultSchedule, stop_event: threading.Event, bound_s: Callable[[], float], run_course: bool,
          cut_bound_s: Callable[[], float] | None, report_cut: bool, healing: Callable[[], Any] | None) -> None:
    with healing() if healing is not None else _nothing():
        if schedule.cut:
            stop_event.set()
            schedule.heal(cut_bound_s or bound_s, report=report_cut)
        elif run_course:
            schedule.heal(bound_s)
            stop_event.set()
        else:
            stop_event.set()
            schedule.heal(bound_s)


@contextmanager
def _nothing() -> Iterator[None]:
    yield
