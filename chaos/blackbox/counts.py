"""The figures only the black-box view has, beside the checker's Counts.

A leaf of the package: the config checks `[expect]` names against them and the verdict
fills them in, so neither needs the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BlackBoxCounts:
    """Figures only the black-box view has (the rest are the checker's Counts)."""

    effects: int = 0
    superseded_unobserved: int = 0
    unattributed_writes: int = 0
    side_effects: int = 0
    duplicated_side_effects: int = 0
    missing_side_effects: int = 0
    stopped_consuming: int = 0      # published events a live consumer never consumed (liveness)

    def __add__(self, other: BlackBoxCounts) -> BlackBoxCounts:
        return BlackBoxCounts(**{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__})

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


SETTLED, NO_PROGRESS, NOBODY_LEFT, NOT_RUN = "settled", "no progress", "no worker alive", "not run"


@dataclass
class Liveness:
    """How a run's drain ended, seen from outside: what a `stopped-consuming` finding rests on.

    The consumer is judged live (``consumers_live``) only when the drain ended for want of
    progress while a worker was still alive and nothing of the rig's stood in its way (every
    fault acted and healed, the producer finished): then events still waiting in Redis were
    left by the consumer, not by a drain cut short or a link still cut."""

    drain_end: str = NOT_RUN        # settled | no progress | no worker alive | not run
    live_workers: list[str] = field(default_factory=list)   # alive when the drain ended
    rig_clear: bool = True          # every fault acted and healed, the producer finished
    stalled_after_heal_s: float | None = None   # None: no fault healed (or none ran)

    @property
    def consumers_live(self) -> bool:
        return self.drain_end == NO_PROGRESS and bool(self.live_workers) and self.rig_clear

    def as_dict(self) -> dict:
        return {"drain_end": self.drain_end, "live_workers": list(self.live_workers),
                "stalled_after_heal_s": self.stalled_after_heal_s}


def stalled_after_heal(healed_at: float | None, progress_at: float | None, ended_at: float,
                       outstanding: int) -> float | None:
    """Seconds the consumer made no progress after the last heal, up to the drain's end
    (monotonic times): None without a heal, 0 when it left nothing outstanding."""
    if healed_at is None:
        return None
    if not outstanding:
        return 0.0
    since = healed_at if progress_at is None else max(healed_at, progress_at)
    return round(max(0.0, ended_at - since), 3)
