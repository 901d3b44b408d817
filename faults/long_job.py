"""long-job: a job runs longer than the claim idle time while other consumers XAUTOCLAIM.

The visibility-timeout class of bug (celery/celery#2599, #3270, #9882): the entry sits in
the running consumer's PEL without being touched, so once it has been idle for the group's
min-idle time another consumer's XAUTOCLAIM takes it and runs it too, while the first run
is still going. Several consumers claiming with a short min-idle hand the entry on from
one to the next (redis/redis#13956): with `claimers=N` the group must have N consumers
besides the one that runs the job first.

The selected job (one event by `event_id`, every event of an `etype`, or every k-th job a
consumer reaches with `every`) stops in its work (failpoint `in_work`, inside the guard:
a lock is held, a transaction may be open) so that the job takes `duration_ms`, which
must exceed the claim idle time. Every consumer that runs the job runs it that long once.
A plain UPDATE applies it twice; CAS and the inbox turn the second run into a no-op.
The checker's `duplicated` anomaly gives the two runs' overlap.
"""
from __future__ import annotations

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import CLAIMED_WHILE_RUNNING
from faults.interface import Fault, FaultContext, Plan

ALWAYS = 10**9


class LongJob(Fault):
    # another consumer claimed the job while a run of it was still going (its start op opens a
    # window to the end of the run: the job may come at any time)
    effect = CLAIMED_WHILE_RUNNING
    name = "long-job"
    description = ("one selected job (or every k-th) runs longer than the claim idle time while other "
                   "consumers run XAUTOCLAIM: it is claimed and runs twice at once")
    params = (
        Param("duration_ms", 1500, "how long the selected job runs (must exceed the preset's claim_idle_ms)",
              minimum=1),
        Param("event_id", "", "the job that runs long (e.g. e1-1)"),
        Param("etype", "", "or every job of this event type (e.g. created)"),
        Param("every", 0, "or every k-th job a consumer reaches (0: off)", kind=int, minimum=0),
        Param("claimers", 1, "consumers besides the first that claim it (each runs it long once in turn)",
              kind=int, minimum=1),
        Param("role", "consumer", "the consumers whose run of the job is long"),
    )

    def validate(self) -> None:
        chosen = [n for n in ("event_id", "etype", "every") if getattr(self, n)]
        if len(chosen) > 1:
            raise BadArguments(f"fault 'long-job': give one selector, not {' and '.join(chosen)} "
                               "(e.g. long-job:event_id=e1-1)")

    def check(self, plan: Plan) -> None:
        strategy = plan.strategy
        if strategy is None and plan.roles:
            raise BadArguments("fault 'long-job' makes a job of the built-in consumers run long (failpoint "
                               "in_work); a black-box worker's job time is its own: give it a long job "
                               "through its config instead (e.g. ORDERS_WORK_MS above its claim idle time)")
        super().check(plan)
        if strategy is None:
            return
        delivery, label = strategy.delivery, strategy.label()
        if delivery.claim != "always" or delivery.name == "fanout":
            raise BadArguments(
                f"fault 'long-job': preset {label} never claims while a job runs (delivery {delivery.name}, "
                f"claim={delivery.claim}); give a group delivery claim=always,claim_idle_ms=300 "
                "(e.g. --preset baseline:claim=always,claim_idle_ms=300)")
        consumers = [p for p in delivery.plans({"guard": strategy.guard.to_spec(), "ack": strategy.ack.to_spec()})
                     if p.role == "consumer"]
        if len(consumers) < self.claimers + 1:
            raise BadArguments(
                f"fault 'long-job': preset {label} has {len(consumers)} consumer(s); claimers={self.claimers} "
                f"needs {self.claimers + 1} (e.g. --part delivery=group:consumers={self.claimers + 1},claim=always,"
                "claim_idle_ms=300)")
        if self.duration_ms <= delivery.claim_idle_ms:
            raise BadArguments(
                f"fault 'long-job': duration_ms={self.duration_ms:g} does not outlast claim_idle_ms="
                f"{delivery.claim_idle_ms:g}, so nobody claims the job; raise duration_ms or lower claim_idle_ms")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        point: dict = {"action": "pause", "pause_ms": self.duration_ms, "count": 1}
        if self.event_id:
            point["event_id"] = self.event_id
        elif self.etype:
            point["etype"], point["count"] = self.etype, ALWAYS
        elif self.every:
            point["every"], point["count"] = self.every, ALWAYS
        return {self.role: {"in_work": point}}

    def run(self, ctx: FaultContext) -> None:
        ctx.record("start", name=self.name, spec=self.spec, duration_ms=self.duration_ms,
                   failpoints={"in_work": "pause"}, note="the selected job pauses in its work (failpoint in_work ops)")
