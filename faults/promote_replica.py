"""promote-replica: failover under asynchronous replication.

On loopback a replica keeps up within a millisecond, so a bare SIGKILL of the primary
loses nothing. The fault therefore holds the replication link (through the
``replication`` proxy) for ``hold_ms`` before the kill: every write acknowledged by the
primary in that window, every group-cursor move and every XACK is missing on the
promoted replica. Then: SIGKILL the primary, wait ``downtime_ms``, ``REPLICAOF NO ONE``
on the replica and repoint every client proxy at it (``Cluster.promote_replica``).

With ``until`` the kill waits, the link still held, for what the failover must take back to
be there, read on both servers (faults.failover_steps.took_back): ``reread``, an entry a
consumer read after the hold that the replica holds (a loaded machine has been seen to run
a whole 500 ms hold with no consumer reading: nothing came back), ``unacked``, one acked
after it, ``unread``, an acked entry nobody read. The run's ``took-back`` effect then asks the kill op for them.
"""
from __future__ import annotations

import time

from chaos.errors import BadArguments
from chaos.params import Param
from faults.failover_steps import (UNTIL_PARAMS, FailoverFault, hold_at_publish, publish_failpoint, replica_offset,
                                   replication_offsets)
from faults.helpers import raise_if
from faults.interface import FaultContext

HOLDS = ("timeout", "down", "latency", "none")


class PromoteReplica(FailoverFault):
    name = "promote-replica"
    description = ("hold the replication link, SIGKILL the primary, REPLICAOF NO ONE on the "
                   "replica and repoint the clients' proxies at it")
    params = (
        Param("after_entries", 1, "wait until the workload's streams hold this many entries (its "
              "progress, not the clock: a loaded machine starts producers late)", kind=int, minimum=0),
        Param("at", "entries", "entries: hold once the streams hold after_entries (then at_ms); "
              "before_publish: the producer `target` stops at its before_publish failpoint after "
              "after_entries publishes, the hold goes on, it resumes: it still has publishes to make "
              "into the hold (a late producer catching up can publish everything before the fault "
              "sees after_entries)", choices=("entries", "before_publish")),
        Param("target", "P-order", "for at=before_publish: the producer process"),
        Param("at_ms", 300, "then wait this long before replication is held"),
        Param("hold_ms", 500, "how long replication is held before the primary is killed"),
        Param("hold", "timeout", "how the replication proxy holds the link: timeout toxic (drops "
              "the stream), down (proxy disabled), latency (delays it), none (a bare kill)",
              choices=HOLDS),
        Param("latency_ms", 2000, "the delay for hold=latency"),
        Param("downtime_ms", 100, "between the kill and the promotion; clients see errors"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled)"),
        *UNTIL_PARAMS,
    )

    def validate(self) -> None:
        if self.hold == "latency" and self.latency_ms <= 0:
            raise BadArguments("fault 'promote-replica': hold=latency needs latency_ms > 0, e.g. latency_ms=2000")
        if self.until and self.hold in ("none", "latency"):
            raise BadArguments(f"fault 'promote-replica': until={'/'.join(self.until)} needs a link that holds "
                               f"everything (hold=timeout or hold=down), not hold={self.hold}: a replica still "
                               f"receiving cannot say what it keeps")
        super().validate()

    def failpoints(self) -> dict[str, dict[str, dict]]:
        return publish_failpoint(self.at, self.target, self.after_entries)

    def run(self, ctx: FaultContext) -> None:
        if not self.armed(ctx):
            self.arm(ctx)
        link = self.failover.link(required=self.hold != "none")
        if self.at == "before_publish":
            held_at, settled = hold_at_publish(ctx, self.wait_ms, lambda: self._hold(ctx, link))
        else:
            waited = self.failover.wait_for_workload(ctx, self.after_entries, self.wait_ms, self.at_ms)
            if waited is not None:
                self.report["entries_wait_s"] = round(waited, 4)
            held_at, settled = self._hold(ctx, link)
        ctx.sleep(self.hold_ms)
        waited = self.hold_until(ctx, settled)
        # Bytes a latency toxic still holds were "in the network" when the primary died: the
        # replica's link is closed so they are dropped, not delivered when the toxic goes.
        figures = self.failover.kill_and_promote(ctx, link, replication_offsets(ctx.cluster), self.downtime_ms,
                                                 drop_link=self.hold == "latency", **waited)
        self.failover.done(ctx, held_s=round(time.monotonic() - held_at, 4), **figures)

    def _hold(self, ctx: FaultContext, link: str | None) -> tuple[float, tuple[int | None, float]]:
        """Hold the link as `hold` says and record the start; returns when, and the replica's
        offset read once the hold is in place."""
        failover, cluster = self.failover, ctx.cluster
        before = replication_offsets(cluster)
        held_at = time.monotonic()
        if self.hold == "timeout":
            failover.toxics.add(link, "timeout", stream="downstream", name="chaos-hold", timeout=0)
        elif self.hold == "down":
            failover.toxics.disable(link)
        elif self.hold == "latency":
            failover.toxics.add(link, "latency", stream="downstream", name="chaos-hold",
                                latency=int(ctx.scale(self.latency_ms) * 1000))
        ctx.record("start", name=self.name, spec=self.spec, step="hold", hold=self.hold, offsets=before)
        return held_at, (replica_offset(cluster.direct_redis("replica")), time.monotonic())

    def heal(self, ctx: FaultContext) -> None:
        """Lift the hold; a primary killed but not yet promoted is promoted now (else the
        clients would have no server). A heal that had to promote, or failed, says so in a
        ``heal`` op: the history then shows why a run ended without the fault's promote op."""
        if not self.armed(ctx):
            return
        errors = self.failover.heal()
        if errors or self.failover.promoted_by_heal:
            ctx.record("info", name=self.name, step="heal", promoted=self.failover.promoted_by_heal,
                       primary=str(ctx.cluster.primary), errors=errors)
        raise_if(errors, self.name)
