"""A fault that acts for a window of time (toxics, signals): starts at ``at_ms``, heals after
``duration_ms``, records its start and stop in the history."""
from __future__ import annotations

import time
from typing import Any

from chaos.params import Param
from faults.helpers import ToxicSet, raise_if
from faults.interface import Fault, FaultContext


WINDOW_PARAMS = (
    Param("at_ms", 0, "when the fault starts, from the start of the workload"),
    Param("duration_ms", 1000, "how long it lasts before it heals by itself"),
)


class WindowFault(Fault):
    """A fault that starts at ``at_ms`` and heals after ``duration_ms``.

    Subclasses implement ``start`` (and ``stop`` if removing toxics is not enough);
    toxics added through ``self.toxics`` are removed at the end and in ``heal``.
    A fault with ``at_ms=0`` starts in ``arm``, so it is in place before the first op.
    """

    at_ms: int
    duration_ms: int

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        """Inflict the fault; return what to record in the history."""
        raise NotImplementedError

    def stop(self, ctx: FaultContext) -> list[str]:
        """Undo ``start``; return errors (empty = healed)."""
        return self.toxics.remove_all()

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.toxics = ToxicSet(getattr(ctx.cluster, "api", None))
        self.started = self.stopped = False
        if self.starts_at_arm():
            self._start(ctx)

    def starts_at_arm(self) -> bool:
        """Whether the fault is in place before the workload's first op."""
        return self.at_ms == 0

    def _start(self, ctx: FaultContext) -> None:
        self.started_at = time.monotonic()
        info = self.start(ctx)
        self.started = True
        ctx.record("start", name=self.name, spec=self.spec, **(info or {}))

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):  # an orchestrator that does not arm
            self.arm(ctx)
        if not self.started:
            ctx.sleep(self.at_ms)
            self._start(ctx)
        self.window_opens(ctx)
        left_s = ctx.scale(self.duration_ms) - (time.monotonic() - self.started_at)
        if left_s > 0:
            time.sleep(left_s)
        self._stop(ctx)

    def window_opens(self, ctx: FaultContext) -> None:
        """Once the fault acts, before `duration_ms` is counted from `started_at`: a fault whose
        window begins on a condition (maxmemory's refused writes) waits here and moves it."""

    def _stop(self, ctx: FaultContext) -> None:
        if self.started and not self.stopped:
            self.stopped = True
            errors = self.stop(ctx)
            ctx.record("stop", name=self.name, healed=not errors, errors=errors)
            raise_if(errors, self.name)

    def heal(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) == id(ctx):
            self._stop(ctx)
            raise_if(self.toxics.remove_all(), self.name)
