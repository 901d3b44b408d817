"""pg-reset: the PostgreSQL link closes mid-transaction.

The consumer stops itself at a failpoint inside its transaction (``before_commit``), a
reset_peer toxic goes on its own PostgreSQL link, and it resumes. ``stream=both``: the
COMMIT is dropped and the link closed, the transaction rolls back, the entry stays
un-acked and is delivered again. ``stream=downstream``: the COMMIT reaches PostgreSQL
and commits, only the reply is lost: the consumer cannot know, does not ack, and the
redelivered copy is applied twice unless the guard (``inbox``) remembers it.

At ``before_commit`` the toxic stays on for ``duration_ms`` and until the consumer has
started its next apply (it stops at ``before_apply``, the toxic goes off, it resumes): the
COMMIT it was resumed to send has then met the reset, however late a loaded machine let it
run. A toxic on for a fixed time alone was gone before a starved consumer sent its COMMIT.
"""
from __future__ import annotations

import time

from chaos.params import Param
from faults.effects import LINK_FAILED
from faults.helpers import pick_worker, proxy_for, raise_if, ToxicSet
from faults.interface import Fault, FaultContext, FaultError


class PgReset(Fault):
    name = "pg-reset"
    touches_publish = False   # a consumer's PostgreSQL link
    effect = LINK_FAILED
    description = "close a consumer's PostgreSQL connection mid-transaction (reset_peer on its link)"
    params = (
        Param("at", "before_commit", "the failpoint inside the transaction, or time",
              choices=("before_commit", "before_apply", "after_apply_before_ack", "time")),
        Param("at_ms", 300, "for at=time: when the toxic goes on"),
        Param("duration_ms", 200, "how long the link stays reset"),
        Param("stream", "both", "both: the COMMIT never reaches PostgreSQL (rollback); downstream: "
              "it commits and only the reply is lost (outcome unknown to the consumer)",
              choices=("both", "downstream")),
        Param("target", "C1", "the consumer process"),
        Param("role", "consumer", "its role"),
        Param("wait_ms", 30000, "for a failpoint: how long to wait for it (unscaled)"),
    )

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at == "time":
            return {}
        points = {self.at: {"action": "signal", "count": 1}}
        if self.at == "before_commit":   # the next apply (the first one is the reset one): the toxic goes off
            points["before_apply"] = {"action": "signal", "after": 1, "count": 1}
        return {self.target: points}

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.toxics = ToxicSet(ctx.cluster.api)
        self.held = None

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        if self.at == "time":
            ctx.sleep(self.at_ms)
            worker = pick_worker(ctx, self.role, self.target)
        else:
            worker, _ = ctx.wait_failpoint(self.at, self.wait_ms)
            self.held = worker
        proxies = proxy_for(ctx, "postgres", worker.name)
        streams = ("upstream", "downstream") if self.stream == "both" else ("downstream",)
        for proxy in proxies:
            for stream in streams:
                self.toxics.add(proxy, "reset_peer", stream=stream, name=f"chaos-pgreset-{stream}", timeout=0)
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, proxies=proxies)
        if self.held is not None:
            ctx.resume(worker)
            self.held = None
        time.sleep(ctx.scale(self.duration_ms))
        waited = {}
        if self.at == "before_commit":
            waited["next_apply"] = self._hold_next_apply(ctx)
        errors = self.toxics.remove_all()
        if self.held is not None:
            ctx.resume(self.held)
            self.held = None
        ctx.record("stop", name=self.name, healed=not errors, **waited)
        raise_if(errors, self.name)

    def _hold_next_apply(self, ctx: FaultContext) -> bool:
        """Wait until the consumer stops at its next apply's start (the reset one has ended);
        it stays stopped (`held`) until the toxic is off. False when it never got there."""
        try:
            self.held, _ = ctx.wait_failpoint("before_apply", self.wait_ms)
        except FaultError:
            return False
        return True

    def heal(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            return
        errors = self.toxics.remove_all()
        if self.held is not None:
            try:
                ctx.resume(self.held)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"resume {self.held.name}: {exc}")
        raise_if(errors, self.name)
