"""`plain`: do the work, then `UPDATE orders SET status, version WHERE id` (no guard at all)."""
from __future__ import annotations

from typing import Callable

from chaos.strategies.guards.base import APPLIED, Guard, Outcome
from chaos.events import Event


class Plain(Guard):
    name = "plain"
    summary = "plain UPDATE: the last writer wins, whatever its version"
    params = ()

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        rows = self.write_in_tx(ev)
        return Outcome(rows, APPLIED, {"status": ev.etype})
