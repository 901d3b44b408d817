"""`setnx-dedupe`: `SET dedupe:<event_id> 1 NX EX ttl` in Redis before the effect.

It drops resent events, but the marker and the effect live in two systems: a crash
after the SET and before the write loses the event (the marker says seen, the effect
never happened). That is the difference from the inbox guard. With `mark=after` the marker
is checked first (GET) and set only once the effect committed: no loss on a crash, but two
runs of one job at once (a job outliving the claim idle time) both pass the check and
both apply.
"""
from __future__ import annotations

from typing import Callable

from chaos.strategies.guards.base import APPLIED, DUPLICATE, Guard, Outcome
from chaos.params import Param
from chaos.events import Event


class SetnxDedupe(Guard):
    name = "setnx-dedupe"
    summary = "SET dedupe:<event_id> NX EX ttl in Redis, then the effect (not atomic with it)"
    params = (Param("ttl_s", 86400, "marker TTL in seconds (not scaled)", minimum=1),
              Param("mark", "before", "SET NX the marker before the work, or check it first and set it "
                    "after the effect", choices=("before", "after")))

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        if self.mark == "after":
            return self._mark_after(ev, entry_id, work)
        if not self.env.redis().set(f"dedupe:{ev.event_id}", entry_id, nx=True, ex=self.ttl_s):
            return Outcome(0, DUPLICATE, {"status": ev.etype, "dedupe": "seen"})
        work()
        rows = self.write_in_tx(ev)
        return Outcome(rows, APPLIED, {"status": ev.etype})

    def _mark_after(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        marker = f"dedupe:{ev.event_id}"
        if self.env.redis().get(marker) is not None:
            return Outcome(0, DUPLICATE, {"status": ev.etype, "dedupe": "seen"})
        work()
        rows = self.write_in_tx(ev)
        self.env.redis().set(marker, entry_id, ex=self.ttl_s)
        return Outcome(rows, APPLIED, {"status": ev.etype})
