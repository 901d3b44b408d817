"""The black-box drain: after the heal, the user's workers work off what is left, watched
from outside, through the run's one wait (chaos/orchestrator/wait.py).

Progress is a new low of pending + undelivered entries. The drain ends settled when nothing
is pending or undelivered, no new effect came for SETTLE_S, and every live worker's consumer
has asked the group for work since the last new effect (or is blocked waiting for it): an
ack-first consumer holds entries it acknowledged and has not written until it comes back, and
a loaded machine (or a stall's SIGSTOP) can make it write nothing for longer than SETTLE_S
(counted as lost, it had not lost them). With nobody left when every
worker is gone, and gives up (what is left is then counted as pending_left) only when the
workers stop making progress: no new low for drain_s. A loaded machine slows a recovering
worker down; a fixed budget would count its still shrinking backlog as left behind."""
from __future__ import annotations

import time
from collections.abc import Callable

from chaos.blackbox.counts import NO_PROGRESS, NOBODY_LEFT, SETTLED
from chaos.orchestrator import wait

SETTLE_S = 0.6  # effects unchanged this long, with nothing pending or undelivered: drained
ROUND_S = 0.1   # between two looks (each reads the stream state and the effects)


class DrainProgress:
    """The drain as the wait sees it (`wait.Progress`): each `poll` counts the entries pending or
    undelivered (`read_outstanding`, None when Redis did not answer: the last count stands) and
    the effects; neither reads a payload or an effect row, every ROUND_S over the whole drain.
    A new low of the backlog is a useful op; `progress_at` is the last new effect or new low
    (None if none), `drained_at` the last look."""

    def __init__(self, read_outstanding: Callable[[], int | None], count_effects: Callable[[], int],
                 read_busy: Callable[[float], list[str]] = lambda quiet_s: []) -> None:
        self.read_outstanding, self.count_effects, self.read_busy = read_outstanding, count_effects, read_busy
        now = time.monotonic()
        self.seen, self.still_since = -1, now
        self.least: int | None = None
        self.outstanding = 0
        self.useful_ops, self.last_useful = 0, now
        self.progress_at: float | None = None
        self.drained_at = 0.0

    def poll(self) -> None:
        outstanding = self.read_outstanding()
        n = self.count_effects()
        now = time.monotonic()
        if n != self.seen:
            if self.seen >= 0:
                self.progress_at = now
            self.seen, self.still_since = n, now
        if outstanding is not None:
            self.outstanding = outstanding
        if self.least is None or self.outstanding < self.least:
            if self.least is not None:
                self.progress_at = now
                self.useful_ops += 1
            self.least, self.last_useful = self.outstanding, now
        self.drained_at = now


def drain(progress: DrainProgress, anyone_alive: Callable[[], bool], window_s: float,
          tick: Callable[[], None]) -> str:
    """Wait out the drain; why it ended (SETTLED, NO_PROGRESS or NOBODY_LEFT). `tick` raises
    to end it (a broken rig)."""
    end = NO_PROGRESS

    def done() -> bool:
        nonlocal end
        now = progress.drained_at
        quiet_s = now - progress.still_since
        if quiet_s >= SETTLE_S and not progress.outstanding and not progress.read_busy(quiet_s):
            end = SETTLED
            return True
        if now - progress.last_useful < window_s and not anyone_alive():
            end = NOBODY_LEFT   # (past the window, no progress is what it is: the wait says so)
            return True
        return False

    stalled = wait.watch(done, 0.0, progress, window_s, tick, slow_factor=0.0, sleep_s=ROUND_S)
    return NO_PROGRESS if stalled is not None else end
