"""A run's faults as threads (faults.local.FaultThread: arm, act, heal), started, joined and
healed the one way for the orchestrator's phases (arm, heal) and the black-box runner.

Each caller says how long a join may take and what a fault that did not act or heal means
for its run (a reason, a fault error)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def start_fault(fault: Any, ctx: Any) -> Any:
    """A started FaultThread of `fault` acting through `ctx` (a fault that cannot arm raises)."""
    from faults.local import FaultThread
    return FaultThread(fault, ctx).start()


def join_faults(threads: list[Any], bound_s: Callable[[], float], on_error: Callable[[Any, BaseException], None],
                errors: tuple[type[BaseException], ...] = (Exception,)) -> None:
    """Wait for each fault's thread up to ``bound_s()`` seconds, then heal it (a join always
    heals); a fault whose act or heal raised one of `errors` goes to ``on_error(fault, exc)``."""
    for thread in threads:
        try:
            thread.join(timeout_s=bound_s())
        except errors as exc:
            on_error(thread.fault, exc)


def abort_faults(threads: list[Any], stop_event: Any, bound_s: float) -> None:
    """The run is ending early (a broken rig, Ctrl-C): stop the faults and heal what they can."""
    stop_event.set()
    for thread in threads:
        try:
            thread.join(timeout_s=bound_s)
        except Exception:  # noqa: BLE001 - healing on a broken rig may fail too
            pass
