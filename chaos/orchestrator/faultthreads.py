"""The faults of one run, started together and joined and healed together: the one fault
schedule of both runners (the orchestrator's phases and the black-box session). A runner
gives the fault context (how its workers are found and its fault ops recorded) and where a
fault's failure goes; arming, the heal bound and the failure's text are decided here once."""
from __future__ import annotations

from collections.abc import Callable
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
