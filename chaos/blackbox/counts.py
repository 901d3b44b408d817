"""The figures only the black-box view has, beside the checker's Counts.

A leaf of the package (it imports only chaos/results.py's Tally): the config checks `[expect]` names against them and the verdict
fills them in, so neither needs the other.
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos.results import Tally


@dataclass
class BlackBoxCounts(Tally):
    """Figures only the black-box view has (the rest are the checker's Counts)."""

    effects: int = 0
    superseded_unobserved: int = 0
    unattributed_writes: int = 0
    side_effects: int = 0
    duplicated_side_effects: int = 0
    missing_side_effects: int = 0
    stopped_consuming: int = 0      # published events a live consumer never consumed (liveness)
    poison_published: int = 0       # poison entries published (fault poison:source=config)
    poison_pending: int = 0         # ... still pending at the end (retried or held forever)
    poison_undelivered: int = 0     # ... never read
    poison_dlq: int = 0             # dead-letter entries naming a poison event or no workload event


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
    healed_at: float | None = None   # when the last fault healed (monotonic; None: no fault)
    ended_at: float = 0.0            # when the drain ended (monotonic)
    progress_at: float | None = None   # the drain's last new low of what waits in Redis

    @property
    def consumers_live(self) -> bool:
        return self.drain_end == NO_PROGRESS and bool(self.live_workers) and self.rig_clear

    def as_dict(self) -> dict:
        return {"drain_end": self.drain_end, "live_workers": list(self.live_workers),
                "stalled_after_heal_s": self.stalled_after_heal_s}


def stalled_after_heal(healed_at: float | None, ended_at: float, progress: Iterable[float],
                       work: Iterable[tuple[float, float]]) -> float | None:
    """The longest window after the last heal, up to the drain's end (monotonic times), in
    which work was outstanding and the consumer made no progress: None without a heal.

    ``progress``: when the consumer made progress (an effect committed, a new low of what
    waits in Redis). ``work``: (published, done) per event, from its publish to its effect
    (or a newer version's), ``inf`` for one still waiting in Redis at the end. A stall that
    later recovered counts too: the window ends at the progress that ended it."""
    if healed_at is None:
        return None
    marks = sorted(t for t in progress if healed_at < t < ended_at)
    ends = [*marks, ended_at]
    items = sorted(work, key=lambda w: w[1])
    dones = [done for _, done in items]
    earliest = [math.inf] * (len(items) + 1)      # earliest publish among items[i:]
    for i in range(len(items) - 1, -1, -1):
        earliest[i] = min(items[i][0], earliest[i + 1])
    longest, start = 0.0, healed_at
    for end in ends:
        # outstanding until `end`: published before it, done at or after it
        published = earliest[bisect.bisect_left(dones, end)]
        if published < end:
            longest = max(longest, end - max(start, published))
        start = end
    return round(longest, 3)
