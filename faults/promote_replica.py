"""promote-replica: failover under asynchronous replication.

On loopback a replica keeps up within a millisecond, so a bare SIGKILL of the primary
loses nothing. The fault therefore holds the replication link (through the
``replication`` proxy) for ``hold_ms`` before the kill: every write acknowledged by the
primary in that window, every group-cursor move and every XACK is missing on the
promoted replica. Then: SIGKILL the primary, wait ``downtime_ms``, ``REPLICAOF NO ONE``
on the replica and repoint every client proxy at it (``Cluster.promote_replica``).
"""
from __future__ import annotations

import time
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import DIED_MID_WORK
from faults.helpers import raise_if, ToxicSet, wait_for_entries
from faults.interface import Fault, FaultContext, FaultError

HOLDS = ("timeout", "down", "latency", "none")
PROBE_KEY = "chaos:replication-probe"


def replication_offsets(cluster: Any) -> dict[str, int | None]:
    """master_repl_offset of the primary and of the replica (None when unreachable)."""
    out: dict[str, int | None] = {}
    for node in ("primary", "replica"):
        try:
            info = cluster.direct_redis(node).info("replication")
            out[node] = int(info.get("master_repl_offset", 0))
        except Exception:  # noqa: BLE001 - a dead node has no offset
            out[node] = None
    return out


def confirm_replicating(cluster: Any, timeout_s: float = 5.0) -> float:
    """Block until a write made now on the primary is readable on the replica; return the
    seconds it took. A failover of a replica that is not replicating would measure nothing
    (WAIT alone is not proof: right after a resync a replica has been seen to ack offsets
    of its previous history)."""
    primary, replica = cluster.direct_redis("primary"), cluster.direct_redis("replica")
    started = time.monotonic()
    token = f"{started:.9f}"
    primary.set(PROBE_KEY, token)
    while True:
        try:
            if replica.get(PROBE_KEY) == token:
                primary.delete(PROBE_KEY)
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - a replica still loading its snapshot: keep polling
            pass
        if time.monotonic() - started > timeout_s:
            raise FaultError(f"promote-replica: a write on the primary did not reach the replica in "
                             f"{timeout_s} s; replication info: {cluster.replication_info()}")
        time.sleep(0.002)


class PromoteReplica(Fault):
    name = "promote-replica"
    effect = DIED_MID_WORK
    takes_down = frozenset({"redis"})   # kills the primary
    description = ("hold the replication link, SIGKILL the primary, REPLICAOF NO ONE on the "
                   "replica and repoint the clients' proxies at it")
    params = (
        Param("after_entries", 1, "wait until the workload's streams hold this many entries (its "
              "progress, not the clock: a loaded machine starts producers late)", kind=int, minimum=0),
        Param("at_ms", 300, "then wait this long before replication is held"),
        Param("hold_ms", 500, "how long replication is held before the primary is killed"),
        Param("hold", "timeout", "how the replication proxy holds the link: timeout toxic (drops "
              "the stream), down (proxy disabled), latency (delays it), none (a bare kill)",
              choices=HOLDS),
        Param("latency_ms", 2000, "the delay for hold=latency"),
        Param("downtime_ms", 100, "between the kill and the promotion; clients see errors"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled)"),
    )

    def validate(self) -> None:
        if self.hold == "latency" and self.latency_ms <= 0:
            raise BadArguments("fault 'promote-replica': hold=latency needs latency_ms > 0, e.g. latency_ms=2000")

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.toxics = ToxicSet(ctx.cluster.api)
        self.killed = self.promoted = False
        self.report: dict[str, Any] = {"sync_wait_s": round(confirm_replicating(ctx.cluster), 4)}

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        cluster = ctx.cluster
        link = cluster.links.get("replication")
        if link is None and self.hold != "none":
            raise FaultError("promote-replica needs the 'replication' proxy; this topology has "
                             f"{sorted(cluster.links)}")
        if self.after_entries:
            self.report["entries_wait_s"] = round(
                wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name), 4)
        ctx.sleep(self.at_ms)
        before = replication_offsets(cluster)
        held_at = time.monotonic()
        if self.hold == "timeout":
            self.toxics.add(link, "timeout", stream="downstream", name="chaos-hold", timeout=0)
        elif self.hold == "down":
            self.toxics.disable(link)
        elif self.hold == "latency":
            self.toxics.add(link, "latency", stream="downstream", name="chaos-hold",
                            latency=int(ctx.scale(self.latency_ms) * 1000))
        ctx.record("start", name=self.name, spec=self.spec, step="hold", hold=self.hold, offsets=before)
        ctx.sleep(self.hold_ms)
        at_kill = replication_offsets(cluster)
        old_primary = str(cluster.primary)
        # Recorded just before the SIGKILL: every write acked before this op was on the old primary.
        ctx.record("info", name=self.name, step="kill", primary=old_primary, offsets=at_kill)
        cluster.kill_primary()
        self.killed = True
        if self.hold == "latency":
            # Bytes the latency toxic still holds were "in the network" when the primary died:
            # close the replica's link so they are dropped, not delivered when the toxic goes.
            self.toxics.disable(link)
        ctx.sleep(self.downtime_ms)
        # The primary is dead: lifting the hold now cannot let the held bytes through.
        raise_if(self.toxics.remove_all(), self.name)
        cluster.promote_replica()
        self.promoted = True
        self.report.update({
            "held_s": round(time.monotonic() - held_at, 4),
            "unreplicated_bytes": (at_kill["primary"] or 0) - (at_kill["replica"] or 0),
            "old_primary": old_primary,
            "new_primary": str(cluster.primary),
            "failed_over": bool(getattr(cluster, "failed_over", True)),
        })
        ctx.record("stop", name=self.name, step="promote", **self.report)

    def heal(self, ctx: FaultContext) -> None:
        """Lift the hold; a primary killed but not yet promoted is promoted now (else the
        clients would have no server)."""
        if getattr(self, "armed_for", None) != id(ctx):
            return
        errors = self.toxics.remove_all()
        if self.killed and not self.promoted:
            try:
                ctx.cluster.promote_replica()
                self.promoted = True
            except Exception as exc:  # noqa: BLE001
                errors.append(f"promote replica: {exc}")
        raise_if(errors, self.name)
