"""The failover steps the replica topology's failover faults share (promote-replica,
replica-overflow): replication confirmed when armed, the replication link found, the wait
for the workload, then the primary SIGKILLed and the replica promoted (every client proxy
repointed at it, ``Cluster.promote_replica``); heal promotes a primary killed but not yet
replaced, so the clients are never left without a server. The kill, the promotion and the
heal's look at them take one lock: a heal that comes while the fault is still on its way to the
kill (its wait outlasted the heal's bound) ends the fault there, so nothing is killed after the
heal; one that comes after the kill promotes (retrying what a loaded machine makes fail for a
while), and the replica is promoted once, by whichever comes first.

What a failover takes back is read on both servers while the link is held, not hoped for
(``took_back``): entries the replica holds that a consumer read or acked on the primary
after the replica's last byte come back (delivered again), and acked entries the replica
never got that no consumer had read are gone (lost). A fault given ``until`` keeps the link
held until what it names is there (``hold_until``), and records the figures in its ``kill``
op, where the ``took-back`` effect (faults.effects) looks for them. With ``at=before_publish``
the hold starts while the producer waits at its failpoint (``publish_failpoint`` arms it,
``hold_at_publish`` puts the hold on and resumes it); sentinel-failover holds the same way.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, TypeVar

from chaos.params import Param
from faults.effects import DIED_MID_WORK, TOOK_BACK, took_back_met
from faults.helpers import ToxicSet, raise_if, wait_for_entries, workload_streams
from faults.interface import Fault, FaultContext, FaultError

T = TypeVar("T")
PROBE_KEY = "chaos:replication-probe"
COUNT_CAP = 10000          # entries counted per stream and kind (a figure, not a bound)
POLL_MS = 5                # how often hold_until reads both servers
SETTLED_S = 0.1            # a replica offset unchanged this long behind a held link has had its last byte
PROMOTE_RETRY_S = 10.0     # a promotion that fails (the replica or the proxy server slow to answer) is tried this long
PROMOTE_RETRY_EVERY_S = 0.05
# What `until` may name: the failover hands out again an entry read (reread) or acked
# (unacked) after the replica's last byte, or takes away an acked entry nobody read (unread).
TAKEN_BACK = ("reread", "unacked", "unread")
UNTIL_PARAMS = (
    Param("until", (), "keep the link held (after the fault's own wait) until the failover would take "
          "these back, read on both servers: reread = an entry the replica holds that a consumer read on the "
          "primary after the replica's last byte (new again to XREADGROUP >), unacked = one a consumer acked "
          "after it (pending again), unread = an acked "
          "entry the replica never got that no consumer has read (it is lost); joined by '/'. Empty: kill "
          "without looking", kind=tuple, choices=TAKEN_BACK),
    Param("until_ms", 20000, "how long `until` may keep the link held (unscaled); then the kill comes anyway "
          "and the run is unknown (the took-back effect is missing)"),
)


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


def replica_offset(replica: Any) -> int | None:
    """The replica's own master_repl_offset (None when it does not answer)."""
    try:
        return int(replica.info("replication").get("master_repl_offset", 0))
    except Exception:  # noqa: BLE001 - a replica loading a snapshot
        return None


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


def publish_failpoint(at: str, target: str, after_entries: int) -> dict[str, dict[str, dict]]:
    """For ``at=before_publish``: the producer ``target`` signals at its before_publish failpoint
    after ``after_entries`` publishes, once (a failover fault's `failpoints()`); else none."""
    if at != "before_publish":
        return {}
    return {target: {"before_publish": {"action": "signal", "after": after_entries, "count": 1}}}


def hold_at_publish(ctx: FaultContext, wait_ms: float, hold: Callable[[], T]) -> T:
    """Wait (up to ``wait_ms``, unscaled) for the producer stopped at its before_publish failpoint,
    put the hold on (``hold()``, its answer returned) and resume the producer whatever happens:
    it still has publishes to make into the hold."""
    producer, _ = ctx.wait_failpoint("before_publish", wait_ms)
    try:
        return hold()
    finally:
        ctx.resume(producer)


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = str(entry_id).partition("-")
    return int(ms), int(seq or 0)


def _stream_last(node: Any, stream: str) -> str | None:
    """The stream's last entry id on `node`; None when the node has no such stream."""
    try:
        return str(node.xinfo_stream(stream)["last-generated-id"])
    except Exception as exc:  # noqa: BLE001 - a stream the replica never got
        if "no such key" in str(exc).lower():
            return None
        raise


def took_back(primary: Any, replica: Any, cap: int = COUNT_CAP) -> dict[str, int]:
    """What a failover now would take back, per kind, summed over the workload's streams and
    groups (entries counted up to `cap` per stream), read on the primary and on the replica
    (whose link is held: what it has now is what it keeps):

    * ``read``: entries the replica holds and its group had not delivered, that the primary's
      group has (come back as new entries to ``XREADGROUP >``);
    * ``acked``: entries pending in the replica's group, acked on the primary (pending again);
    * ``unread``: entries past both the replica's last entry and the primary's group cursor
      (acknowledged to the producer, never on the replica, read by nobody: lost).

    Raises what the servers raise (a replica loading a snapshot answers LOADING)."""
    out = {"read": 0, "acked": 0, "unread": 0}
    for stream in workload_streams(primary):
        rep_stream = _stream_last(replica, stream)
        rep_last = rep_stream or "0-0"
        rep_groups = {g["name"]: g for g in replica.xinfo_groups(stream)} if rep_stream else {}
        for group in primary.xinfo_groups(stream):
            name, pri_cursor = group["name"], str(group["last-delivered-id"])
            floor = max(pri_cursor, rep_last, key=_id)
            out["unread"] += len(primary.xrange(stream, f"({floor}", "+", count=cap))
            if name not in rep_groups:
                continue
            rep_cursor = str(rep_groups[name]["last-delivered-id"])
            top = min(pri_cursor, rep_last, key=_id)
            if _id(top) > _id(rep_cursor):
                out["read"] += len(replica.xrange(stream, f"({rep_cursor}", top, count=cap))
            held = {p["message_id"] for p in replica.xpending_range(stream, name, "-", "+", COUNT_CAP)}
            if held:
                still = {p["message_id"] for p in primary.xpending_range(stream, name, "-", "+", COUNT_CAP)}
                out["acked"] += len(held - still)
    return out


class KillAndPromote:
    """One failover of a fault named ``fault`` on ``cluster``: its toxics, its report (which
    starts with the replication check made when it is built, at the fault's arm) and how far
    it got (``killed``: the kill began; ``promoted``; ``healed``: the heal has looked, so the
    fault kills nothing from then on). The kill, the promotion and the heal's look hold
    ``steps``, so a heal never runs between the kill's op and the SIGKILL, and the replica is
    promoted once."""

    def __init__(self, fault: str, cluster: Any):
        self.fault, self.cluster = fault, cluster
        self.toxics = ToxicSet(cluster.api)
        self.killed = self.promoted = self.healed = False
        self.promoted_by_heal = False
        self.steps = threading.RLock()
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

    def hold_until(self, ctx: FaultContext, until: tuple[str, ...], until_ms: float,
                   settled: tuple[int | None, float] | None = None) -> dict[str, Any]:
        """With the replication link held, read both servers every POLL_MS until the failover
        would take back what `until` names (and the replica's offset has not moved for
        SETTLED_S, so what it holds is what it keeps), at most `until_ms` (scaled). `settled`:
        the replica's offset and when it was read, if known (the hold's start). Returns for
        the kill op ``took_back`` (read once more when the wait ends, with whole counts: the
        figures the effect judges; None if the replica did not answer), ``until``, ``met``
        (the wait ended on the condition, not on `until_ms`) and ``until_wait_s``."""
        primary, replica = self.cluster.direct_redis("primary"), self.cluster.direct_redis("replica")
        started = time.monotonic()
        deadline = started + ctx.scale(until_ms)
        offset, since = settled or (None, started)
        while True:
            now_offset = replica_offset(replica)
            if now_offset is None or now_offset != offset:
                offset, since = now_offset, time.monotonic()
            done = took_back_met(until, self._took_back(primary, replica, cap=1)) and \
                time.monotonic() - since >= SETTLED_S
            if done or time.monotonic() > deadline or not ctx.sleep(POLL_MS):
                return {"took_back": self._took_back(primary, replica), "until": list(until), "met": done,
                        "until_wait_s": round(time.monotonic() - started, 4)}

    def _took_back(self, primary: Any, replica: Any, cap: int = COUNT_CAP) -> dict[str, int] | None:
        try:
            return took_back(primary, replica, cap)
        except Exception as exc:  # noqa: BLE001 - a replica loading a snapshot: look again
            self.report["took_back_error"] = f"{type(exc).__name__}: {exc}"[:200]
            return None

    def kill_and_promote(self, ctx: FaultContext, link: str | None, at_kill: dict[str, Any], downtime_ms: float,
                         *, drop_link: bool, **kill_info: Any) -> dict[str, Any]:
        """Record the kill (every write acked before that op was on the old primary), SIGKILL the
        primary, close ``link`` if ``drop_link`` (bytes a toxic still holds die with the primary),
        wait ``downtime_ms``, lift every toxic (nothing held can get through now) and promote
        the replica (a toxic that would not go is reported after the promotion: the clients
        must have a server). Returns the figures of the failover. A fault already healed (the
        run ended and its heal's bound passed while the fault waited) kills nothing: FaultError."""
        cluster = self.cluster
        with self.steps:
            if self.healed:
                raise FaultError(f"{self.fault}: healed before its kill (the run ended while it waited, and the "
                                 f"heal's bound passed): nothing killed")
            old_primary = str(cluster.primary)
            ctx.record("info", name=self.fault, step="kill", primary=old_primary, offsets=at_kill, **kill_info)
            self.killed = True      # before the SIGKILL: a kill that raised may have landed, the heal promotes then
            cluster.kill_primary()
        errors: list[str] = []
        if drop_link:
            try:
                self.toxics.disable(link)
            except Exception as exc:  # noqa: BLE001 - reported after the promotion
                errors.append(f"close link {link}: {exc}")
        ctx.sleep(downtime_ms)
        errors += self.toxics.remove_all()
        self.promote()
        raise_if(errors, self.fault)
        return {"unreplicated_bytes": (at_kill["primary"] or 0) - (at_kill["replica"] or 0),
                "old_primary": old_primary, "new_primary": str(cluster.primary),
                "failed_over": bool(getattr(cluster, "failed_over", True))}

    def promote(self, retry_s: float = PROMOTE_RETRY_S) -> None:
        """Promote the replica (``Cluster.promote_replica``), once: a second call, by the fault or
        its heal, does nothing. An error is tried again for ``retry_s``, then raised (a replica
        or a proxy server that a loaded machine keeps from answering for a while must not leave
        the clients without a server; the promotion is safe to repeat until it took)."""
        with self.steps:
            if self.promoted:
                return
            deadline = time.monotonic() + retry_s
            while True:
                try:
                    self.cluster.promote_replica()
                    break
                except Exception:  # noqa: BLE001 - tried again until the deadline, then raised
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(PROMOTE_RETRY_EVERY_S)
            self.promoted = True

    def done(self, ctx: FaultContext, **figures: Any) -> None:
        """The fault's last op: ``promote``, with the whole report."""
        self.report.update(figures)
        ctx.record("stop", name=self.fault, step="promote", **self.report)

    def heal(self) -> list[str]:
        """Lift the toxics; from now on the fault kills nothing, and a primary it killed but has
        not replaced is promoted now. Returns the errors."""
        errors = self.toxics.remove_all()
        with self.steps:      # (a kill under way ends first: then it is promoted here)
            self.healed = True
            if self.killed and not self.promoted:
                try:
                    self.promote()
                    self.promoted_by_heal = True
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"promote replica: {exc}")
        return errors


class FailoverFault(Fault):
    """A fault that ends in a KillAndPromote (promote-replica, replica-overflow): its arm
    builds the failover (replication confirmed first) and its report; `until` given, the
    run's effect is took-back (the kill op must show what the kill waited for), else
    died-mid-work (judged at the kill op). Subclasses declare UNTIL_PARAMS among theirs."""

    effect = DIED_MID_WORK
    takes_down = frozenset({"redis"})   # kills the primary

    def validate(self) -> None:
        if self.until:
            self.effect = TOOK_BACK

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.failover = KillAndPromote(self.name, ctx.cluster)
        self.report = self.failover.report

    def armed(self, ctx: FaultContext) -> bool:
        """Whether this run armed it (a fault run without arm arms itself; heal of one never armed does nothing)."""
        return getattr(self, "armed_for", None) == id(ctx)

    def hold_until(self, ctx: FaultContext, settled: tuple[int | None, float] | None) -> dict[str, Any]:
        """KillAndPromote.hold_until with the fault's `until` (nothing, at once, without one)."""
        return self.failover.hold_until(ctx, self.until, self.until_ms, settled) if self.until else {}
