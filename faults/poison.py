"""poison: payloads that always fail. The consumers' apply raises for the selected events
at every attempt: without a DLQ they stay pending forever; with ``max_attempts`` and a DLQ
they move there. (The poison-no-dlq / poison-dlq presets carry their own poison jobs, 1
per 500; this fault adds poison to any workload.) With ``source=config`` it acts on a
black-box worker instead: the run publishes the payload the worker config's ``[poison]``
table declares (chaos/blackbox/config.py), and the scorecard grades ``poison_handled``."""
from __future__ import annotations

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import FAILPOINT_FIRED
from faults.interface import Fault, FaultContext, Plan

ALWAYS = 10**9  # fire at every delivery


class Poison(Fault):
    name = "poison"
    touches_publish = False   # a consumer's apply
    effect = FAILPOINT_FIRED   # a selected event reached a consumer and its apply failed
    description = "make the selected events' apply fail at every attempt (a poison message)"
    params = (
        Param("key", "", "poison every event of this key (e.g. j7, 42)"),
        Param("etype", "", "poison every event of this type (e.g. paid)"),
        Param("event_id", "", "poison one event (e.g. e42-2)"),
        Param("role", "consumer", "the consumers that fail on it"),
        Param("source", "failpoint", "failpoint: the built-in consumers' apply fails for the selected events; "
              "config: a black-box run publishes the poison payload its worker config declares ([poison])",
              choices=("failpoint", "config")),
    )

    def validate(self) -> None:
        chosen = [n for n in ("key", "etype", "event_id") if getattr(self, n)]
        if self.source == "config":
            self.effect = ""   # no failpoint: the black-box run's scorecard grades poison_handled
            if chosen:
                raise BadArguments("fault 'poison:source=config' publishes the worker config's [poison] payload "
                                   f"on keys of its own: drop {', '.join(chosen)}=")
            return
        if not chosen:
            raise BadArguments("fault 'poison' needs a selector, else every event fails: "
                               "give key=, etype= or event_id= (e.g. poison:key=j7; on a black-box worker: "
                               "poison:source=config)")

    def check(self, plan: Plan) -> None:
        blackbox = plan.strategy is None and bool(plan.roles)
        if self.source == "config" and not blackbox:
            raise BadArguments("fault 'poison:source=config' publishes a black-box worker config's [poison] "
                               "payload; a built-in preset's consumers fail by selector (e.g. poison:key=42)")
        if self.source == "config":
            return          # it acts through the workload: no failpoint
        if blackbox:
            raise BadArguments("fault 'poison' fails a built-in consumer's apply at a failpoint; on a black-box "
                               "worker give --fault poison:source=config and a [poison] table in its config "
                               "(e.g. fields = { version = \"not-a-number\" })")
        super().check(plan)

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.source == "config":
            return {}
        point: dict = {"action": "fail", "count": ALWAYS}
        for selector in ("key", "etype", "event_id"):
            if getattr(self, selector):
                point[selector] = getattr(self, selector)
        return {self.role: {"before_apply": point}}

    def run(self, ctx: FaultContext) -> None:
        """The failpoints act in the workers; this records what they are (a selector that matches
        no event of the workload leaves no `failpoint` op: the run tested nothing)."""
        if self.source != "config":
            ctx.record("start", name=self.name, spec=self.spec, failpoints={"before_apply": "fail"})
