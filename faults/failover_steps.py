"""The failover steps the replica topology's failover faults share (promote-replica,
replica-overflow): replication confirmed when armed, the replication link found, the wait
for the workload, then the primary SIGKILLed and the replica promoted (every client proxy
repointed at it, ``Cluster.promote_replica``); heal promotes a primary killed but not yet
replaced, so the clients are never left without a server.
"""
from __future__ import annotations

import time
from typing import Any

from faults.helpers import ToxicSet, raise_if, wait_for_entries
from faults.interface import FaultContext, FaultError

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


def confirm_replicating(cluster: Any, timeout_s: float = 5.0, fault: str = "promote-replica") -> float:
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
            raise FaultError(f"{fault}: a write on the primary did not reach the replica in "
                             f"{timeout_s} s; replication info: {cluster.replication_info()}")
        time.sleep(0.002)


class KillAndPromote:
    """One failover of a fault named ``fault`` on ``cluster``: its toxics, its report (which
    starts with the replication check made when it is built, at the fault's arm) and how far
    it got (``killed``, ``promoted``)."""

    def __init__(self, fault: str, cluster: Any):
        self.fault, self.cluster = fault, cluster
        self.toxics = ToxicSet(cluster.api)
        self.killed = self.promoted = False
        self.report: dict[str, Any] = {"sync_wait_s": round(confirm_replicating(cluster, fault=fault), 4)}

    def link(self, required: bool = True) -> str | None:
        """The replication proxy's name (None when the topology has none and it is not ``required``)."""
        link = self.cluster.links.get("replication")
        if link is None and required:
            raise FaultError(f"{self.fault} needs the 'replication' proxy; this topology has "
                             f"{sorted(self.cluster.links)}")
        return link

    def wait_for_workload(self, ctx: FaultContext, after_entries: int, wait_ms: float, at_ms: float) -> float | None:
        """Until the workload's streams hold ``after_entries`` (seconds waited, None if 0 asked),
        then ``at_ms`` more."""
        waited = wait_for_entries(ctx, after_entries, wait_ms / 1000, self.fault) if after_entries else None
        ctx.sleep(at_ms)
        return waited

    def kill_and_promote(self, ctx: FaultContext, link: str | None, at_kill: dict[str, Any], downtime_ms: float,
                         *, drop_link: bool, **kill_info: Any) -> dict[str, Any]:
        """Record the kill (every write acked before that op was on the old primary), SIGKILL the
        primary, close ``link`` if ``drop_link`` (bytes a toxic still holds die with the primary),
        wait ``downtime_ms``, lift every toxic (nothing held can get through now) and promote
        the replica. Returns the figures of the failover."""
        cluster = self.cluster
        old_primary = str(cluster.primary)
        ctx.record("info", name=self.fault, step="kill", primary=old_primary, offsets=at_kill, **kill_info)
        cluster.kill_primary()
        self.killed = True
        if drop_link:
            self.toxics.disable(link)
        ctx.sleep(downtime_ms)
        raise_if(self.toxics.remove_all(), self.fault)
        cluster.promote_replica()
        self.promoted = True
        return {"unreplicated_bytes": (at_kill["primary"] or 0) - (at_kill["replica"] or 0),
                "old_primary": old_primary, "new_primary": str(cluster.primary),
                "failed_over": bool(getattr(cluster, "failed_over", True))}

    def done(self, ctx: FaultContext, **figures: Any) -> None:
        """The fault's last op: ``promote``, with the whole report."""
        self.report.update(figures)
        ctx.record("stop", name=self.fault, step="promote", **self.report)

    def heal(self) -> list[str]:
        """Lift the toxics; a primary killed but not yet promoted is promoted now. Returns the errors."""
        errors = self.toxics.remove_all()
        if self.killed and not self.promoted:
            try:
                self.cluster.promote_replica()
                self.promoted = True
            except Exception as exc:  # noqa: BLE001
                errors.append(f"promote replica: {exc}")
        return errors
