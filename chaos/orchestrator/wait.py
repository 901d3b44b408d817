"""The one wait of a run's phases (the orchestrator's workload and drain, the black-box drain):
until a condition holds, and past a first bound for as long as the run makes progress.

A runner gives what progress is (`Progress`: the orchestrator tails the history, the black
box watches effects and the backlog from outside), what to look at on every round (`tick`:
the rig watcher's findings, worker deaths) and how long it sleeps between rounds."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

DONE_EVERY_MAX_S = 0.1      # a phase's end condition, while the run is busy, is asked at least this often
SLOW_FACTOR = 10.0          # past the bound, a wait also lasts this many mean gaps between useful ops


class Progress(Protocol):
    """What a wait watches: `poll()` looks again; `useful_ops` counts progress seen so far,
    `last_useful` is when the last came (monotonic seconds)."""

    useful_ops: int
    last_useful: float

    def poll(self) -> Any: ...


class NoProgress:
    """A wait with nothing to watch: with stall_s 0 it ends at its bound (a hard budget)."""

    def __init__(self) -> None:
        self.useful_ops, self.last_useful = 0, time.monotonic()

    def poll(self) -> None:
        pass


def watch(done: Callable[[], bool], bound_s: float, progress: Progress, stall_s: float,
          tick: Callable[[], None], *, slow_factor: float = SLOW_FACTOR,
          sleep_s: float = 0.01) -> tuple[float, float] | None:
    """Call `tick` (which raises to end the wait), poll `progress` and ask `done` until it holds
    (None). Past `bound_s` the wait goes on while the run makes progress: it ends only when no
    useful op came for `stall_s`, or for `slow_factor` times the mean gap between useful ops
    so far if that is longer (a slow run is not a stalled one): then (seconds waited, seconds
    since the last useful op).

    `done` may be costly, so it is asked at once only while the run is quiet (no useful op
    since it was last asked: the moment it may have become true); while useful ops keep
    coming, every 5 % of the time waited so far, at most every DONE_EVERY_MAX_S."""
    started = time.monotonic()
    first_ops = progress.useful_ops
    asked_at, asked_ops = float("-inf"), -1
    while True:
        tick()
        progress.poll()
        now = time.monotonic()
        if progress.useful_ops == asked_ops or now - asked_at >= min(DONE_EVERY_MAX_S, (now - started) / 20):
            asked_at, asked_ops = now, progress.useful_ops
            if done():
                return None
            now = time.monotonic()
        if now - started > bound_s:
            last = progress.last_useful
            ops = progress.useful_ops - first_ops
            gap = (last - started) / ops if ops and last > started else 0.0  # between useful ops, so far
            if now - last > max(stall_s, slow_factor * gap):
                return now - started, now - last
        time.sleep(sleep_s)
