"""sentinel-failover: the primary fails and Redis Sentinel, not the framework, fails over.

Needs the sentinel topology (``--topology sentinel``). With ``hold_ms`` the replication
link is held in both directions first, and stays held (writes the primary acknowledges
meanwhile never reach the replica; holding the acks too lets ``min-replicas-max-lag``
notice). Then, by ``mode``:

* ``partition`` (the default): cut the primary's proxy, the one every client and
  Sentinel reaches it through; it keeps running and, unless held, keeps replicating what
  it had, so nothing acknowledged is lost: what clients meet is the detection time.
  When the cut heals (``rejoin``) the old primary is still a primary until Sentinel
  demotes it (about 1 s on a loaded box); a client told its address before the switch
  (one loaded run: the producer asked just before the switch and connected just after
  the heal) writes there, and the demotion drops those writes: Redis Sentinel's split
  brain. With ``fence`` (the default) the old primary gets ``min-replicas-to-write 1``
  (Redis's documented guard) before the heal, once it counts no good replica (its replica
  was promoted and left), so it refuses every write (NOREPLICAS) until it is demoted and
  nothing acknowledged is lost by construction; ``fence=0`` leaves it open, and the stop
  record counts what it took after the heal (``acked_after_heal``, all dropped);
* ``kill``: SIGKILL the primary; what was still on its way to the replica is lost;
* ``manual``: ``SENTINEL FAILOVER``, as an operator would; the old primary keeps taking
  writes until Sentinel demotes it (redis/redis#6062).

With ``until`` (as promote-replica's, faults.failover_steps) the link is held whatever
``hold_ms`` says, and the primary fails only once the failover would take back what
``until`` names, read on both servers every 5 ms (a processed entry that comes back, an
acked one nobody read); the strike op records ``took_back`` and the run's effect is
``took-back``, so a run whose hold never saw it is ``unknown``. ``at=before_publish`` starts
the hold at the producer's failpoint after ``after_entries`` publishes, so events are
published into it (a late producer catching up can publish everything before the fault
sees ``after_entries``: a loaded run then had nothing to lose).

Sentinel detects (down-after-milliseconds, scaled; the Sentinels past the quorum only vote,
see VOTER_DOWN_AFTER_MS), agrees, elects a leader and promotes the replica by itself;
clients find the new primary by asking Sentinel. With ``rejoin``
the old primary comes back (restarted empty, or the cut healed) and Sentinel turns it
into a replica, which drops what it had not replicated (redis/redis#12570).

The stop record carries detection and promotion times (from the action), the entries
the old primary acknowledged past the replica's last synced entry, and the Sentinel
events seen. A Sentinel that never promotes fails the fault with the Sentinels' logs,
so the run is ``unknown``. A Sentinel whose timer ran over 2 s late (a starved machine) is in
TILT and does not act until TILT_PERIOD_MS pass without another late tick (chaos/cluster/
sentinels.py): each wait for the Sentinels gives them that long more, once, when they are or
were in TILT since the action, and a wait that still ends unmet names TILT as the rig's failure
(the Sentinels could not act), not the failover's.
"""
from __future__ import annotations

import re
import time
from typing import Any

from chaos.cluster.sentinels import TILT_PERIOD_MS, in_tilt
from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import DIED_MID_WORK, TOOK_BACK
from faults.failover_steps import UNTIL_PARAMS, KillAndPromote, hold_at_publish, publish_failpoint, replica_offset
from faults.helpers import raise_if, wait_for_entries, workload_streams
from faults.interface import Fault, FaultContext, FaultError

MODES = ("partition", "kill", "manual")
POLL_S = 0.005
# The orchestrator waits 60 s (times the time scale) for a fault's thread: the fault's own
# schedule must fit in it, or it would be cut before Sentinel could act.
FAULT_BUDGET_MS = 55000
# down-after-milliseconds scales with the time scale but not below this: Sentinel works on a
# 100 ms timer, and on a loaded 2-core box 200 ms judged the just-promoted replica down too
# and failed over a second time, back to the old primary restarted empty.
MIN_DOWN_AFTER_MS = 1000
# The Sentinels past the quorum only vote: their down-after is this long, so they never judge the
# primary down and never stand for leader. Three Sentinels that judged it down within the same
# 10 ms (a loaded 2-core box, the cut seen by all at once) each voted for itself; the election
# aborted (-failover-abort-not-elected) and, failover-timeout being 600 s, nobody retried within
# the run. With one that only votes for whoever asks first, one of the others has a majority.
# Such a voter names the old primary (not down in its eyes) to clients until it learns the switch:
# the old primary comes back (rejoin) only once every Sentinel names the new one (measured: 34
# acknowledged events lost in a run whose cut healed while the voter still named the old primary).
VOTER_DOWN_AFTER_MS = 3_600_000
SENTINEL_EVENTS = re.compile(r"[+-](sdown|odown|try-failover|elected-leader|selected-slave|promoted-slave|"
                             r"failover-end|switch-master|convert-to-slave|tilt|failover-abort-[a-z-]+)\b")


class SentinelFailover(Fault):
    name = "sentinel-failover"
    effect = DIED_MID_WORK   # judged when the primary fails (the op marked struck), after any hold
    takes_down = frozenset({"redis"})   # mode=kill kills the primary
    description = ("partition, kill or SENTINEL FAILOVER the primary (replication optionally held first); "
                   "Sentinel detects, elects and promotes the replica by itself (needs --topology sentinel)")
    params = (
        Param("mode", "partition", "how the primary fails: partition (cut from clients and Sentinels, "
              "still replicating), kill (SIGKILL), manual (SENTINEL FAILOVER)", choices=MODES),
        Param("after_entries", 1, "wait until the workload's streams hold this many entries (progress, "
              "not the clock)", kind=int, minimum=0),
        Param("at", "entries", "entries: hold once the streams hold after_entries (then at_ms); "
              "before_publish: the producer `target` stops at its before_publish failpoint after "
              "after_entries publishes, the hold goes on, it resumes (it still has publishes to make "
              "into the hold)", choices=("entries", "before_publish")),
        Param("target", "P-order", "for at=before_publish: the producer process"),
        Param("at_ms", 300, "then wait this long before replication is held"),
        Param("hold_ms", 0, "replication held (both directions) this long before the primary fails, and "
              "after (0: never held)"),
        Param("down_after_ms", 1000, "Sentinel's down-after-milliseconds: how long the primary must be "
              f"unreachable before a Sentinel judges it down (scaled, not below {MIN_DOWN_AFTER_MS} ms)"),
        Param("rejoin", True, "the old primary comes back (kill: restarted empty; partition: the cut "
              "heals) and Sentinel demotes it; manual always keeps it", kind=bool),
        Param("fence", True, "partition with rejoin: before the cut heals, the old primary gets "
              "min-replicas-to-write 1 and the fault waits until it counts no good replica, so it refuses "
              "writes until Sentinel demotes it (0: it takes them, and the demotion drops them; counted as "
              "acked_after_heal)", kind=bool),
        Param("elect_timeout_ms", 15000, "how long Sentinel may take to promote; past it the run is unknown"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled)"),
        *UNTIL_PARAMS,
    )

    def validate(self) -> None:
        if self.down_after_ms < 10:
            raise BadArguments(f"fault 'sentinel-failover': down_after_ms={self.down_after_ms} is below Sentinel's "
                               f"ping resolution; give 10 or more, e.g. down_after_ms=1000")
        if self.mode != "manual" and self.down_after_ms >= self.elect_timeout_ms:
            raise BadArguments(f"fault 'sentinel-failover': down_after_ms={self.down_after_ms} is not shorter than "
                               f"elect_timeout_ms={self.elect_timeout_ms}, so Sentinel could never act within the "
                               f"run: lower down_after_ms or raise elect_timeout_ms")
        total = self.at_ms + self.hold_ms + 2 * self.elect_timeout_ms + (self.until_ms if self.until else 0)
        if total > FAULT_BUDGET_MS:
            raise BadArguments(f"fault 'sentinel-failover': at_ms + hold_ms + 2 x elect_timeout_ms (+ until_ms) = "
                               f"{total} ms is longer than a run gives a fault ({FAULT_BUDGET_MS} ms, scaled): "
                               f"lower them")
        if self.until:
            self.effect = TOOK_BACK

    def failpoints(self) -> dict[str, dict[str, dict]]:
        return publish_failpoint(self.at, self.target, self.after_entries)

    # -- lifecycle ---------------------------------------------------------------------------
    def arm(self, ctx: FaultContext) -> None:
        cluster = ctx.cluster
        if not hasattr(cluster, "sentinel_master"):
            raise FaultError("sentinel-failover needs the sentinel topology: run with --topology sentinel "
                             "(pytest: --chaos-topology sentinel); promote-replica is this fault's replica-topology "
                             "counterpart")
        self.armed_for = id(ctx)
        self.old = self.new = ""
        self.killed = self.promoted = False
        self.after_heal = 0
        self.fenced: tuple[Any, str] | None = None
        self.down_after_s = max(ctx.scale(self.down_after_ms), MIN_DOWN_AFTER_MS / 1000)
        cluster.set_down_after(round(self.down_after_s * 1000))
        voters = _voters_only(cluster)
        # the replication check, the toxics and hold_until of promote-replica's failover
        self.failover = KillAndPromote(self.name, cluster)
        self.toxics = self.failover.toxics
        self.report: dict[str, Any] = {"mode": self.mode, "voters_only": voters, **self.failover.report}

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        cluster = ctx.cluster
        link = cluster.links["replication"]
        if self.at == "before_publish":
            held_at, settled = hold_at_publish(ctx, self.wait_ms, lambda: self._hold(ctx, link))
        else:
            if self.after_entries:
                self.report["entries_wait_s"] = round(
                    wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name), 4)
            ctx.sleep(self.at_ms)
            held_at, settled = self._hold(ctx, link)
        ctx.sleep(self.hold_ms)
        waited = self.failover.hold_until(ctx, self.until, self.until_ms, settled) if self.until else {}
        self.report.update(waited)
        replica_last = _last_ids(cluster.direct_redis("replica"))
        old_client = cluster.direct_redis("primary")
        self.beyond = _beyond(old_client, replica_last)
        log_from = self.log_from = _log_offsets(cluster)
        acted_at = time.monotonic()
        # the struck op carries `took_back` (the took-back effect reads it there, as promote-replica's kill op)
        ctx.record("info", name=self.name, step=self.mode, struck=True, old_primary=self.old,
                   acked_after_sync=self.beyond, **waited)
        if self.mode == "kill":
            cluster.kill_node(self.old)
            self.killed = True
        elif self.mode == "partition":
            self.toxics.disable(cluster.node_proxy(self.old))
        else:
            self._sentinel_failover(cluster)
        detect = self._await_promotion(ctx, acted_at, old_client, replica_last)
        # The replica is a primary now and has left the held link: lifting the hold lets nothing through.
        for proxy, name in list(self.toxics.toxics):
            if proxy == link:
                self.toxics.api.remove_toxic(proxy, name)
                self.toxics.toxics.remove((proxy, name))
        self.promoted = True
        self.report["calmed"] = _judge_no_more(cluster)
        cluster.follow(force=True)       # the cluster's direct clients (final state, checks) follow too
        self.report.update(detect)
        if self.mode == "manual" or self.rejoin:
            # every Sentinel names the new primary before the old one can be reached again: one that
            # still named it (a voter learns the switch from the others' hello) sent a client there
            self.report["switched_s"] = _await_switched(self, cluster, self.new, acted_at, self._elect_s(ctx))
            healed: dict[str, str] | None = None
            if self.mode == "kill":
                cluster.restart_node(self.old)
            elif self.mode == "partition":
                if self.fence:
                    self.fenced = (old_client, _fence(old_client, self._elect_s(ctx), self.old))
                    self.report["fenced_s"] = round(time.monotonic() - acted_at, 4)
                healed = _last_ids(old_client)
                raise_if(self.toxics.remove_all(), self.name)
            self.report["demote_s"] = self._await_demotion(ctx, acted_at, old_client, replica_last, healed)
            self._unfence()
        self.report.update({
            "held_s": round(acted_at - held_at, 4),
            "acked_after_sync": self.beyond, "acked_after_heal": self.after_heal,
            "old_primary": self.old, "new_primary": self.new,
            "new_primary_address": str(cluster.node_address(self.new)),
            "failed_over": True,
            "sentinel_events": _sentinel_events(cluster, log_from),
        })
        ctx.record("stop", name=self.name, step="promoted", **self.report)

    def _hold(self, ctx: FaultContext, link: str) -> tuple[float, tuple[int | None, float]]:
        """Hold the link both ways (if hold_ms or until asks) and record the start; returns when,
        and the replica's offset read once the hold is in place."""
        cluster = ctx.cluster
        self.old = cluster.primary_id()
        self.new = "b" if self.old == "a" else "a"
        held_at = time.monotonic()
        held = bool(self.hold_ms or self.until)
        if held:
            self.toxics.add(link, "timeout", stream="downstream", name="chaos-hold-down", timeout=0)
            self.toxics.add(link, "timeout", stream="upstream", name="chaos-hold-up", timeout=0)
        ctx.record("start", name=self.name, spec=self.spec, step="hold" if held else self.mode,
                   old_primary=self.old)
        return held_at, (replica_offset(cluster.direct_redis("replica")), time.monotonic())

    def heal(self, ctx: FaultContext) -> None:
        """Lift the hold and any cut. A primary killed that Sentinel never replaced is started
        again (empty), so the run can still read a final state (its verdict is unknown)."""
        if getattr(self, "armed_for", None) != id(ctx):
            return
        errors = self.toxics.remove_all()
        try:
            self._unfence()
        except Exception as exc:  # noqa: BLE001
            errors.append(f"min-replicas-to-write back on node {self.old}: {exc}")
        if self.killed and not self.promoted and ctx.cluster.node_role(self.old) == "down":
            try:
                ctx.cluster.restart_node(self.old)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"restart node {self.old}: {exc}")
        raise_if(errors, self.name)

    # -- steps ---------------------------------------------------------------------------------
    def _elect_s(self, ctx: FaultContext) -> float:
        """How long Sentinel may take: elect_timeout_ms scaled, never less than down-after + 1 s."""
        return max(ctx.scale(self.elect_timeout_ms), self.down_after_s + 1.0)

    def _sentinel_failover(self, cluster: Any) -> None:
        errors = []
        for client in cluster.sentinel_clients():
            try:
                client.execute_command("SENTINEL", "FAILOVER", cluster.master_name)
                return
            except Exception as exc:  # noqa: BLE001 - try the next Sentinel, report all
                errors.append(f"{type(exc).__name__}: {exc}")
        raise FaultError(f"sentinel-failover: no Sentinel accepted SENTINEL FAILOVER: {errors}")

    def _await_promotion(self, ctx: FaultContext, acted_at: float, old_client: Any,
                         replica_last: dict[str, str]) -> dict[str, Any]:
        """Poll the Sentinels until they name the other node and it says it is the primary."""
        cluster = ctx.cluster
        limit = TiltLimit(self, cluster, acted_at + self._elect_s(ctx))
        out: dict[str, Any] = {"detect_s": None, "odown_s": None}
        while True:
            now = time.monotonic()
            flags = _master_flags(cluster)
            if out["detect_s"] is None and any("s_down" in f for f in flags):
                out["detect_s"] = round(now - acted_at, 4)
            if out["odown_s"] is None and any("o_down" in f for f in flags):
                out["odown_s"] = round(now - acted_at, 4)
            address = cluster.sentinel_master()
            if address is not None and cluster.node_at(address) == self.new and cluster.node_role(self.new) == "master":
                out["promote_s"] = round(now - acted_at, 4)
                return out
            if self.mode != "kill":
                self.beyond = max(self.beyond, _beyond(old_client, replica_last, quiet=True))
            if limit.passed():
                raise FaultError(f"sentinel-failover ({self.mode}): {limit.tilt_text()}Sentinel did not promote node "
                                 f"{self.new} within {limit.waited_s():.1f} s (primary flags per Sentinel: {flags}; "
                                 f"they name {address}); Sentinel logs:\n{cluster.sentinel_logs()}")
            time.sleep(POLL_S)

    def _unfence(self) -> None:
        """Put the old node's min-replicas-to-write back (a replica by now: it ignores it anyway)."""
        if self.fenced is not None:
            client, before = self.fenced
            self.fenced = None
            client.config_set("min-replicas-to-write", before)

    def _await_demotion(self, ctx: FaultContext, acted_at: float, old_client: Any,
                        replica_last: dict[str, str], healed: dict[str, str] | None = None) -> float:
        """Until the old primary is a replica of the new one (Sentinel's +convert-to-slave); counts
        the entries it took after the cut healed (`healed`: its last entries then), all dropped."""
        cluster = ctx.cluster
        limit = TiltLimit(self, cluster, time.monotonic() + self._elect_s(ctx))
        while True:
            role = cluster.node_role(self.old)
            if role == "slave":
                return round(time.monotonic() - acted_at, 4)
            if role == "master" and self.mode != "kill":
                self.beyond = max(self.beyond, _beyond(old_client, replica_last, quiet=True))
                if healed is not None:
                    self.after_heal = max(self.after_heal, _beyond(old_client, healed, quiet=True))
            if limit.passed():
                raise FaultError(f"sentinel-failover ({self.mode}): {limit.tilt_text()}Sentinel did not demote the "
                                 f"old primary (node {self.old}, role {role}) within {limit.waited_s():.1f} s; "
                                 f"Sentinel logs:\n{cluster.sentinel_logs()}")
            time.sleep(POLL_S)


def _await_switched(fault: SentinelFailover, cluster: Any, new: str, acted_at: float, limit_s: float) -> float:
    """Until every live Sentinel names node `new` as the primary; seconds since `acted_at`."""
    limit = TiltLimit(fault, cluster, time.monotonic() + limit_s)
    want = str(cluster.node_address(new))
    while True:
        named = []
        for client in cluster.sentinel_clients():
            try:
                host, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", cluster.master_name)
                named.append(f"{host}:{port}")
            except Exception:  # noqa: BLE001 - a Sentinel busy failing over: ask again
                named.append(None)
        if named and all(n == want for n in named):
            return round(time.monotonic() - acted_at, 4)
        if limit.passed():
            raise FaultError(f"sentinel-failover: {limit.tilt_text()}the Sentinels name {named} as the primary "
                             f"{limit.waited_s():.1f} s after the promotion of {new} ({want}); Sentinel logs:\n"
                             f"{cluster.sentinel_logs()}")
        time.sleep(POLL_S)


class TiltLimit:
    """A wait for the Sentinels with its deadline, moved once by TILT_PERIOD_MS plus an election
    (down-after + 1 s) when, at the deadline, a Sentinel is in TILT or entered it since the
    action (its log's +tilt): Sentinel does not act in TILT, so that time is the starved rig's,
    not the failover's. `tilt_text` names it for the error of a wait that ends unmet."""

    def __init__(self, fault: SentinelFailover, cluster: Any, deadline: float) -> None:
        self.fault, self.cluster, self.deadline = fault, cluster, deadline
        self.started = time.monotonic()
        self.tilted: list[int] = []
        self.entered = 0

    def passed(self) -> bool:
        now = time.monotonic()
        if now <= self.deadline:
            return False
        if self.entered or self.tilted:     # moved once already
            return True
        self.tilted = [i + 1 for i in in_tilt(self.cluster.sentinel_clients())]
        self.entered = _sentinel_events(self.cluster, getattr(self.fault, "log_from", {})).get("+tilt", 0)
        if not (self.tilted or self.entered):
            return True
        grace = TILT_PERIOD_MS / 1000 + self.fault.down_after_s + 1.0
        self.deadline = now + grace
        self.fault.report["tilt_waited_s"] = round(self.fault.report.get("tilt_waited_s", 0) + grace, 3)
        return False

    def waited_s(self) -> float:
        return time.monotonic() - self.started

    def tilt_text(self) -> str:
        """'' or why the rig, not the system under test, failed the wait."""
        if not (self.tilted or self.entered):
            return ""
        return (f"the rig could not act, not the system under test: Sentinel(s) {self.tilted or '-'} in TILT mode "
                f"({self.entered} +tilt since the action: a Sentinel whose timer runs over 2 s late, on a starved "
                f"machine, stops acting until {TILT_PERIOD_MS} ms pass without another; waited that long more). ")


def _fence(client: Any, limit_s: float, node: str) -> str:
    """min-replicas-to-write 1 on the cut old primary (Redis's documented guard against a split
    brain), then wait until it counts no good replica (its replica was promoted and left): from
    then on it refuses every write (NOREPLICAS) until Sentinel demotes it. Returns the setting
    it had (put back once it is a replica)."""
    key = "min-replicas-to-write"
    before = str(client.config_get(key).get(key, "0"))
    client.config_set(key, 1)
    deadline = time.monotonic() + limit_s
    while True:
        good = client.info("replication").get("min_slaves_good_slaves")
        if good is not None and int(good) == 0:
            return before
        if time.monotonic() > deadline:
            client.config_set(key, before)
            raise FaultError(f"sentinel-failover: the old primary (node {node}) still counts {good} good "
                             f"replica(s) {limit_s:.1f} s after min-replicas-to-write 1, so it would take "
                             f"writes once the cut heals: {client.info('replication')}")
        time.sleep(POLL_S)


def _voters_only(cluster: Any) -> int:
    """Give the Sentinels past the quorum VOTER_DOWN_AFTER_MS (see there); how many took it."""
    quorum = getattr(getattr(cluster, "spec", None), "quorum", None)
    clients = cluster.sentinel_clients()
    if not quorum or quorum >= len(clients):
        return 0
    return _down_after(clients[quorum:], cluster.master_name, VOTER_DOWN_AFTER_MS)


def _judge_no_more(cluster: Any) -> int:
    """Once the failover this fault caused is done, give every Sentinel VOTER_DOWN_AFTER_MS, so
    none judges the new primary down for the rest of the run: the short down-after was for
    detecting this fault's cut only. Beside two CPU hogs a starved new primary missed its 1 s
    down-after and Sentinel failed over a second time, back to the old primary before its
    sync from the new one was done: 11-23 acknowledged writes lost in an s1 or s5 run.
    How many took it."""
    return _down_after(cluster.sentinel_clients(), cluster.master_name, VOTER_DOWN_AFTER_MS)


def _down_after(clients: list[Any], master_name: str, down_after_ms: int) -> int:
    """SENTINEL SET down-after-milliseconds on each of `clients`; how many took it (a stopped
    Sentinel judges and votes for nothing anyway)."""
    took = 0
    for client in clients:
        try:
            client.execute_command("SENTINEL", "SET", master_name, "down-after-milliseconds", down_after_ms)
            took += 1
        except Exception:  # noqa: BLE001 - see above
            continue
    return took


# -- measurements ---------------------------------------------------------------------------
def _master_flags(cluster: Any) -> list[str]:
    flags = []
    for client in cluster.sentinel_clients():
        try:
            reply = client.execute_command("SENTINEL", "MASTER", cluster.master_name)
            flags.append(dict(zip(reply[::2], reply[1::2])).get("flags", ""))
        except Exception:  # noqa: BLE001 - a Sentinel busy failing over: ask again
            continue
    return flags


def _last_ids(client: Any) -> dict[str, str]:
    out = {}
    for stream in workload_streams(client):
        last = client.xrevrange(stream, count=1)
        out[stream] = last[0][0] if last else "0-0"
    return out


def _beyond(client: Any, since: dict[str, str], quiet: bool = False) -> int:
    """Entries on the (old) primary past `since` (each stream's last entry then), read in one
    transaction with its role: 0 once it is a replica (what it holds then is the new primary's,
    synced: counted apart from its role, a loaded run counted 8 such entries as taken after the heal)."""
    try:
        streams = workload_streams(client)
        pipe = client.pipeline(transaction=True)
        pipe.execute_command("ROLE")
        for stream in streams:
            pipe.xrange(stream, min=f"({since.get(stream, '0-0')}", max="+")
        role, *ranges = pipe.execute()
        return sum(len(r) for r in ranges) if str(role[0]) == "master" else 0
    except Exception:  # noqa: BLE001 - a dead or demoted node has nothing to count
        if quiet:
            return 0
        raise


def _log_offsets(cluster: Any) -> dict[str, int]:
    out = {}
    for proc in cluster.sentinel_procs:
        path = proc.workdir / "sentinel-server.log"
        out[str(path)] = path.stat().st_size if path.exists() else 0
    return out


def _sentinel_events(cluster: Any, offsets: dict[str, int]) -> dict[str, int]:
    """How many of each Sentinel event the Sentinels logged since the action."""
    counts: dict[str, int] = {}
    for path, offset in offsets.items():
        try:
            with open(path, errors="replace") as log:
                log.seek(offset)
                text = log.read()
        except OSError:
            continue
        for match in SENTINEL_EVENTS.finditer(text):
            counts[match.group(0)] = counts.get(match.group(0), 0) + 1
    return counts
