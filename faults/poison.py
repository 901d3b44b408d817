"""poison: payloads that always fail. The consumers' apply raises for the selected events
at every attempt: without a DLQ they stay pending forever; with ``max_attempts`` and a DLQ
they move there. (The poison-no-dlq / poison-dlq presets carry their own poison jobs, 1
per 500; this fault adds poison to any workload.)"""
from __future__ import annotations

from chaos.errors import BadArguments
from chaos.params import Param
from faults.interface import Fault

ALWAYS = 10**9  # fire at every delivery


class Poison(Fault):
    name = "poison"
    description = "make the selected events' apply fail at every attempt (a poison message)"
    params = (
        Param("key", "", "poison every event of this key (e.g. j7, 42)"),
        Param("etype", "", "poison every event of this type (e.g. paid)"),
        Param("event_id", "", "poison one event (e.g. e42-2)"),
        Param("role", "consumer", "the consumers that fail on it"),
    )

    def validate(self) -> None:
        if not (self.key or self.etype or self.event_id):
            raise BadArguments("fault 'poison' needs a selector, else every event fails: "
                               "give key=, etype= or event_id= (e.g. poison:key=j7)")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        point: dict = {"action": "fail", "count": ALWAYS}
        for selector in ("key", "etype", "event_id"):
            if getattr(self, selector):
                point[selector] = getattr(self, selector)
        return {self.role: {"before_apply": point}}
