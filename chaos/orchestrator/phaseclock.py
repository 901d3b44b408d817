"""The phase clock: the phases of a run, timed the one way for both runners (the orchestrator's
phases in sequence.py and the black-box session's), named from one list."""
from __future__ import annotations

import time

from chaos.results import Phase

PHASES = ("reset", "arm", "workload", "heal", "drain", "stop", "check")


class PhaseClock:
    """`enter(name)` ends the phase under way (if any) and starts `name`; `close()` ends the one
    under way. Each ended phase is appended to `phases` as a Phase of run `run`."""

    def __init__(self, run: int, phases: list[Phase]) -> None:
        self.run, self.phases = run, phases
        self.current: tuple[str, float] | None = None

    @property
    def name(self) -> str | None:
        """The phase under way (None: none)."""
        return self.current[0] if self.current else None

    def enter(self, name: str, since: float | None = None) -> None:
        if name not in PHASES:
            raise ValueError(f"phase {name!r} is none of {PHASES}")
        self.close()
        self.current = (name, time.monotonic() if since is None else since)

    def close(self) -> None:
        if self.current is not None:
            name, start = self.current
            self.current = None
            self.phases.append(Phase(self.run, name, start, time.monotonic()))
