"""replica-overflow: a replica falls behind under a burst, loses its link, and the failover
comes while it resyncs.

Redis closes a replica's connection when its output buffer passes `client-output-buffer-
limit replica <hard>` (production configs shrink it to protect the primary's memory). A
replica that stalls for a moment (a slow disk, a VM pause) while a burst is written then
loses its link; it reconnects and resyncs (partial from the backlog, or a full sync), and
until that finishes it is behind by everything written since the stall, while the stream
keeps growing. A failover in that window promotes a replica that never had those writes.

The fault, on the primary and its replica: set the limit to `limit_kb`; put a `bandwidth`
toxic of `resync_kbps` on the replication link (a resync of production size takes minutes,
not the milliseconds of loopback), so from the stall on everything the primary sends (what
its buffers and the proxy held at the drop, then the resync) reaches the replica at that
rate; SIGSTOP the replica (it stops reading, so the buffer fills); write `burst_kb` of
filler (SETs of 64 KB values on `chaos:burst:*`, keys the workload never reads) until the
primary drops the replica; SIGCONT the replica; `resync_ms` later hold the link (a
`timeout` toxic: nothing more reaches the replica), wait until the primary is ahead of the
replica (it wrote after the hold, or the replica's offset has settled below the primary's),
then SIGKILL the primary and promote the replica (as `promote-replica`). The replica being
behind at the kill is thus checked, not hoped for: a replica that caught up and a primary
that writes nothing more make the fault raise instead of failing over in no window.

Behind in bytes is not yet a loss: a run whose consumers had read everything written since
the stall before the kill lost nothing (seen on a quiet CI machine: 6.2 MB unreplicated, 0
lost). With ``until`` the link stays held until the failover would take back what it names,
read on both servers (faults.failover_steps.took_back), and the kill op records it for the
``took-back`` effect.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.failover_steps import SETTLED_S, UNTIL_PARAMS, FailoverFault, replication_offsets
from faults.helpers import raise_if
from faults.interface import FaultContext, FaultError

BURST_VALUE_KB = 64
BURST_KEYS = 16            # filler cycles over these keys: the primary's memory stays ~1 MB
BEHIND_WAIT_S = 10.0       # how long the held link waits for the primary to be ahead of the replica


def replica_state(cluster: Any) -> dict[str, Any]:
    """The replica's view of its link (None values when it does not answer)."""
    try:
        info = cluster.direct_redis("replica").info("replication")
    except Exception as exc:  # noqa: BLE001 - a replica loading a snapshot answers LOADING
        return {"link": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"link": info.get("master_link_status"), "sync_in_progress": info.get("master_sync_in_progress"),
            "offset": info.get("slave_repl_offset")}


def repl_offset(cluster: Any, node: str) -> int | None:
    """A node's master_repl_offset (None when it does not answer, e.g. loading a snapshot)."""
    try:
        return int(cluster.direct_redis(node).info("replication").get("master_repl_offset", 0))
    except Exception:  # noqa: BLE001
        return None


class ReplicaOverflow(FailoverFault):
    name = "replica-overflow"       # SIGSTOPs the replica, then kills the primary
    description = ("stall the replica during a burst until its output buffer limit drops its link, "
                   "then fail over while it resyncs over a slow link")
    params = (
        Param("after_entries", 1, "wait until the workload's streams hold this many entries (its progress, "
              "not the clock)", kind=int, minimum=0),
        Param("at_ms", 300, "then wait this long before the stall"),
        Param("limit_kb", 256, "client-output-buffer-limit replica: the hard limit (KB)", kind=int, minimum=16),
        Param("burst_kb", 32768, "at most this much filler is written while the replica is stalled (KB)",
              kind=int, minimum=64),
        Param("resync_kbps", 256, "bandwidth of the replication link from the stall to the kill: what the "
              "primary sends after the stall, the resync included, reaches the replica at this rate (KB/s)",
              kind=int, minimum=1),
        Param("resync_ms", 300, "from the replica's SIGCONT to the hold of the link and the SIGKILL of the "
              "primary (once it is ahead of the replica): the failover comes this far into the resync"),
        Param("downtime_ms", 100, "between the kill and the promotion; clients see errors"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled)"),
        *UNTIL_PARAMS,
    )

    def validate(self) -> None:
        if self.burst_kb <= self.limit_kb:
            raise BadArguments(f"fault {self.name!r}: burst_kb={self.burst_kb} cannot overflow a limit of "
                               f"limit_kb={self.limit_kb}: give burst_kb well above it, e.g. "
                               f"burst_kb={max(32768, self.limit_kb * 64)}")
        super().validate()

    def arm(self, ctx: FaultContext) -> None:
        super().arm(ctx)
        self.stopped_pid: int | None = None
        self.saved_limit: str | None = None

    def run(self, ctx: FaultContext) -> None:
        if not self.armed(ctx):
            self.arm(ctx)
        failover, cluster = self.failover, ctx.cluster
        link = failover.link()
        failover.wait_for_workload(ctx, self.after_entries, self.wait_ms, self.at_ms)
        primary = cluster.direct_redis("primary")
        self.saved_limit = primary.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
        limit = self.limit_kb * 1024
        primary.config_set("client-output-buffer-limit", f"replica {limit} {limit // 2} 1")
        pid = cluster.redis_pid("replica")
        if pid is None:
            raise FaultError(f"{self.name}: the replica has no process to stall on this backend")
        scale = max(ctx.scale(1000), 1e-3)   # seconds per second: a longer time scale, a slower link
        # Before the stall, so nothing the primary sends from now on (what its socket and the
        # proxy hold when it drops the replica, then the resync) outruns the slow link.
        failover.toxics.add(link, "bandwidth", stream="downstream", name="chaos-slow-resync",
                            rate=max(1, round(self.resync_kbps / scale)))
        before = replication_offsets(cluster)
        stalled_at = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        self.stopped_pid = pid
        ctx.record("start", name=self.name, spec=self.spec, step="stall", offsets=before)
        written = self._burst(primary)
        dropped_after_s = time.monotonic() - stalled_at
        os.kill(pid, signal.SIGCONT)
        self.stopped_pid = None
        ctx.record("info", name=self.name, step="link-lost", burst_kb=written // 1024,
                   stalled_s=round(dropped_after_s, 4), offsets=replication_offsets(cluster))
        ctx.sleep(self.resync_ms)
        failover.toxics.add(link, "timeout", stream="downstream", name="chaos-hold", timeout=0)
        at_kill = self._wait_until_behind(cluster, primary, time.monotonic() - stalled_at)
        settled = at_kill.pop("settled")
        waited = self.hold_until(ctx, settled)
        if waited:
            at_kill = {**at_kill, **replication_offsets(cluster)}
        state = replica_state(cluster)
        # what the slow link still holds dies with the primary
        figures = failover.kill_and_promote(ctx, link, at_kill, self.downtime_ms, drop_link=True, replica=state,
                                            **waited)
        failover.done(ctx, burst_kb=written // 1024, link_lost_after_s=round(dropped_after_s, 4),
                      replica_at_kill=state, **figures)

    def _wait_until_behind(self, cluster: Any, primary: Any, since_stall_s: float) -> dict[str, Any]:
        """With the link held, block until the primary is ahead of the replica; return the
        offsets (the replica's read first, so it cannot look ahead of the primary's), and
        `settled`: the replica's offset and since when it has not moved.

        Bytes the primary writes after the hold cannot reach the replica, so a primary offset
        past the one read once the hold is in place proves the replica behind. With nothing
        written (the workload done), a replica offset that has stopped moving below the
        primary's proves it too: the held link delivers nothing more. Neither within
        BEHIND_WAIT_S: the replica caught up, and a kill now would be no resync window."""
        held = int(primary.info("replication")["master_repl_offset"])
        started = time.monotonic()
        last: int | None = None
        still_since = started
        while True:
            behind_at = repl_offset(cluster, "replica")
            ahead = repl_offset(cluster, "primary") or 0
            offsets = {"primary": ahead, "replica": behind_at}
            now = time.monotonic()
            if behind_at != last:
                last, still_since = behind_at, now
            if ahead > held or (behind_at is not None and ahead > behind_at and now - still_since >= SETTLED_S):
                return {**offsets, "held_primary": held, "behind_wait_s": round(now - started, 4),
                        "settled": (behind_at, still_since)}
            if now - started > BEHIND_WAIT_S:
                raise FaultError(
                    f"{self.name}: the replica was not behind at the kill: {since_stall_s:.1f} s after the "
                    f"stall it is at offset {behind_at}, the primary at {ahead}, and the primary wrote "
                    f"nothing in {BEHIND_WAIT_S:.0f} s with the link held; the workload ended or the "
                    f"resync finished first: lower resync_ms or resync_kbps, or fire earlier (after_entries)")
            time.sleep(0.005)

    def _burst(self, primary: Any) -> int:
        """Write filler until the primary has dropped the replica; return the bytes written."""
        value = "x" * (BURST_VALUE_KB * 1024)
        written, n = 0, 0
        while written < self.burst_kb * 1024:
            pipe = primary.pipeline(transaction=False)
            for _ in range(4):
                pipe.set(f"chaos:burst:{n % BURST_KEYS}", value)
                n += 1
            pipe.execute()
            written += 4 * len(value)
            if not primary.info("replication").get("connected_slaves"):
                return written
        raise FaultError(f"{self.name}: {written // 1024} KB written and the primary still holds its replica: "
                         f"its output buffer never passed limit_kb={self.limit_kb}; raise burst_kb or lower limit_kb")

    def heal(self, ctx: FaultContext) -> None:
        """SIGCONT a replica still stopped, lift the slow link, restore the limit on a primary still
        alive, and promote the replica if the primary was killed but not yet replaced."""
        if not self.armed(ctx):
            return
        errors = []
        if self.stopped_pid is not None:
            try:
                os.kill(self.stopped_pid, signal.SIGCONT)
                self.stopped_pid = None
            except Exception as exc:  # noqa: BLE001
                errors.append(f"SIGCONT replica: {exc}")
        errors += self.failover.heal()
        if not self.failover.killed and self.saved_limit is not None:
            try:
                ctx.cluster.direct_redis("primary").config_set("client-output-buffer-limit", self.saved_limit)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"restore client-output-buffer-limit: {exc}")
        raise_if(errors, self.name)
