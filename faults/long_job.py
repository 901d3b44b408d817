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

With ``until_claimed=1`` (an ``event_id`` job) the job stops at ``in_work`` (SIGSTOP) instead of
sleeping, and the fault resumes it once ``duration_ms`` has passed *and* the group's PEL no
longer has the entry in this consumer's name (another consumer's XAUTOCLAIM took it), read on
the primary every 10 ms, *and* the last claimer's run has stopped at ``in_work`` itself (its
delivery is recorded by then, so every claim falls inside the runs before it however short the
job's cost and however late a loaded machine lets a claimer record it; and no earlier run's XACK,
which acks the entry whoever holds it, can end the chain of claims before its end); the last of
the ``claimers + 1`` runs, whom nobody is to claim from, resumes after ``duration_ms``. The claim the cell is about then happens during the job's run
every run, however late a loaded machine lets the claimer's XAUTOCLAIM come (a 1.5 s sleep by
the clock left that to chance). A claim that never comes within ``wait_ms`` fails the fault:
the run is unknown.

Until a holder of the job has stopped at ``in_work`` (the first reader, then each claimer but the
last) the fault keeps the job's pending entry fresh in that holder's name (XCLAIM to the same
consumer, min-idle 0, JUSTID: no delivery counted; checked and done in one script, so a claim that
came meanwhile is never undone), as the consumers' own ``keep_held`` does in the drain. So nobody
claims the job before its holder's long part has begun: the holder's way from its read to
``in_work`` (for s5 its first PostgreSQL connection, BEGIN and a SELECT through its proxy) took more
than the 1 s min-idle beside two CPU hogs, the claim then came first, and the effect
(claimed-while-running: the holder reached ``in_work`` with the job before the claim) was missing.
From the holder's stop at ``in_work`` on, the job ages as before, and the claim is the claimer's own
XAUTOCLAIM after the preset's min-idle. The fault's thread only has to look every 10 ms (a freshen
when the entry has been idle ``FRESH_MS``), not the holder's whole way to run in time.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import CLAIMED_WHILE_RUNNING
from faults.helpers import arrivals, heal_stopped, process_alive, workload_streams
from faults.interface import Fault, FaultContext, FaultError, Plan

ALWAYS = 10**9
FRESH_MS = 20         # the job's entry is freshened once idle this long (min-idle: 100 ms and more)
# the job's pending entry back to idle 0 in its holder's name, only while that consumer holds it
_FRESHEN = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if p[1] and p[1][2] == ARGV[3] then
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
  return 1
end
return 0
"""


class LongJob(Fault):
    # another consumer claimed the job while a run of it was still going (its start op opens a
    # window to the end of the run: the job may come at any time)
    effect = CLAIMED_WHILE_RUNNING
    name = "long-job"
    touches_publish = False   # a consumer's job
    description = ("one selected job (or every k-th) runs longer than the claim idle time while other "
                   "consumers run XAUTOCLAIM: it is claimed and runs twice at once")
    params = (
        Param("duration_ms", 1500, "how long the selected job runs (must exceed the preset's claim_idle_ms; "
              "with until_claimed a run claimed from lasts until its claim anyway: the last run's length)",
              minimum=1),
        Param("event_id", "", "the job that runs long (e.g. e1-1)"),
        Param("etype", "", "or every job of this event type (e.g. created)"),
        Param("every", 0, "or every k-th job a consumer reaches (0: off)", kind=int, minimum=0),
        Param("claimers", 1, "consumers besides the first that claim it (each runs it long once in turn)",
              kind=int, minimum=1),
        Param("role", "consumer", "the consumers whose run of the job is long"),
        Param("until_claimed", False, "an event_id job stops (SIGSTOP) and resumes after duration_ms and "
              "once another consumer has claimed it (the group's PEL no longer names this one); the last "
              "run after duration_ms", kind=bool),
        Param("wait_ms", 30000, "with until_claimed: how long a run waits for its claim (unscaled)"),
    )

    def validate(self) -> None:
        chosen = [n for n in ("event_id", "etype", "every") if getattr(self, n)]
        if len(chosen) > 1:
            raise BadArguments(f"fault 'long-job': give one selector, not {' and '.join(chosen)} "
                               "(e.g. long-job:event_id=e1-1)")
        if self.until_claimed and not self.event_id:
            raise BadArguments("fault 'long-job': until_claimed follows one entry's claims: give event_id "
                               "(e.g. long-job:event_id=e42-1,until_claimed=1)")

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
        if self.duration_ms <= delivery.claim_idle_ms and not self.until_claimed:
            raise BadArguments(
                f"fault 'long-job': duration_ms={self.duration_ms:g} does not outlast claim_idle_ms="
                f"{delivery.claim_idle_ms:g}, so nobody claims the job; raise duration_ms or lower claim_idle_ms")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.until_claimed:
            return {self.role: {"in_work": {"action": "signal", "count": 1, "event_id": self.event_id}}}
        point: dict = {"action": "pause", "pause_ms": self.duration_ms, "count": 1}
        if self.event_id:
            point["event_id"] = self.event_id
        elif self.etype:
            point["etype"], point["count"] = self.etype, ALWAYS
        elif self.every:
            point["every"], point["count"] = self.every, ALWAYS
        return {self.role: {"in_work": point}}

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.done = threading.Event()
        self.stopped: list = []            # until_claimed: runs stopped at in_work, not yet resumed
        self.arrived = [threading.Event() for _ in range(self.claimers + 1)]   # the nth run stopped at in_work
        self.missed: list[str] = []
        self.lock = threading.Lock()
        self.in_work: set[str] = set()     # consumers that stopped at in_work with the job

    def run(self, ctx: FaultContext) -> None:
        action = "signal" if self.until_claimed else "pause"
        ctx.record("start", name=self.name, spec=self.spec, duration_ms=self.duration_ms,
                   failpoints={"in_work": action}, note="the selected job pauses in its work (failpoint in_work ops)")
        if not self.until_claimed:
            return
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        fresh = threading.Thread(target=self._keep_fresh, args=(ctx,), daemon=True, name="long-job-fresh")
        fresh.start()
        releases = []
        for nth, worker in zip(range(1, self.claimers + 2), arrivals(ctx, "in_work", self.done)):
            with self.lock:
                self.stopped.append(worker)
                self.in_work.add(worker.name)
            self.arrived[nth - 1].set()
            releases.append(threading.Thread(target=self._release, args=(ctx, worker, nth),
                                             daemon=True, name=f"long-job-{worker.name}"))
            releases[-1].start()
        for thread in releases:
            thread.join()
        fresh.join()
        if self.missed:
            raise FaultError(f"fault 'long-job': {'; '.join(self.missed)}: the claim it forces did not happen")

    def _release(self, ctx: FaultContext, worker: Any, nth: int) -> None:
        """Resume `worker` (the nth run) after duration_ms and, if someone is to claim from it, once
        the PEL no longer names it for the job and the last claimer's run has stopped at in_work
        (records `info` with what it waited for)."""
        claimed_from = nth <= self.claimers
        stopped_at = time.monotonic()
        time.sleep(ctx.scale(self.duration_ms))   # the whole run's length, as the pause's, even past the workload
        deadline = stopped_at + self.wait_ms / 1000
        claimed = None
        if claimed_from:
            # looked at once more after the run ended: a claimed copy acked at once (a marker set before
            # the work) ends the workload while this run still sleeps
            while not (claimed := not self._holds(ctx, worker.name)):
                if ctx.stop_event.is_set() or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            if not claimed:
                self.missed.append(f"nobody claimed {self.event_id} from {worker.name} within {self.wait_ms} ms")
            # the last claimer's run under way (stopped at in_work): this one may end now (its XACK
            # cannot cut the chain short); a claimed copy that never reaches in_work (a marker set
            # before the work: acked at once) leaves it to the heal
            last = self.arrived[self.claimers]
            while claimed and not last.is_set() and not self.done.is_set():
                if ctx.stop_event.is_set() or time.monotonic() > deadline:
                    break
                last.wait(0.01)
        ctx.record("info", name=self.name, step="resume", worker=worker.name, claimed=claimed,
                   claimer_in_work=self.arrived[self.claimers].is_set() if claimed_from else None,
                   stopped_s=round(time.monotonic() - stopped_at, 4))
        self._resume(ctx, worker)

    def _keep_fresh(self, ctx: FaultContext) -> None:
        """Until the last run has stopped at in_work: the job's pending entry, idle FRESH_MS or more
        and held by a consumer not yet stopped at in_work, back to idle 0 in that consumer's name;
        records `info` with how often, per holder, once the holder stops at in_work."""
        r = ctx.cluster.direct_redis("primary")
        where, seen, counts, reported = None, {}, {}, set()
        try:
            while not (self.done.is_set() or ctx.stop_event.is_set() or self.arrived[self.claimers].is_set()):
                where = where or self._find(r, seen)
                for stream, group, entry_id in where or ():
                    pending = r.xpending_range(stream, group, entry_id, entry_id, 1)
                    owner = pending[0]["consumer"] if pending else None
                    if owner and owner not in self.in_work and pending[0]["time_since_delivered"] >= FRESH_MS:
                        if r.eval(_FRESHEN, 1, stream, group, entry_id, owner):
                            counts[owner] = counts.get(owner, 0) + 1
                for name in [n for n in counts if n in self.in_work and n not in reported]:
                    reported.add(name)
                    ctx.record("info", name=self.name, step="fresh", worker=name, freshened=counts[name])
                time.sleep(0.01)
        finally:
            r.close()

    def _find(self, r: Any, seen: dict[str, str]) -> list[tuple[str, str, str]] | None:
        """(stream, group, entry id) per group of the job's stream once the job is in it; `seen`:
        each stream's last id looked at (each entry is read once)."""
        for stream in workload_streams(r):
            for entry_id, fields in r.xrange(stream, seen.get(stream, "-"), "+", count=1000):
                if fields.get("event_id") == self.event_id:
                    return [(stream, group["name"], entry_id) for group in r.xinfo_groups(stream)]
                seen[stream] = "(" + entry_id
        return None

    def _holds(self, ctx: FaultContext, consumer: str) -> bool:
        """Whether the group's PEL has the job's entry in `consumer`'s name (read on the primary)."""
        r = ctx.cluster.direct_redis("primary")
        for stream in workload_streams(r):
            for group in r.xinfo_groups(stream):
                mine = [p["message_id"] for p in r.xpending_range(stream, group["name"], "-", "+", 1000,
                                                                   consumername=consumer)]
                for entry_id in mine:
                    entry = r.xrange(stream, entry_id, entry_id)
                    if entry and entry[0][1].get("event_id") == self.event_id:
                        return True
        return False

    def _resume(self, ctx: FaultContext, worker: Any) -> None:
        with self.lock:
            if worker not in self.stopped:
                return
            self.stopped.remove(worker)
        if process_alive(worker.pid):
            ctx.resume(worker)

    def heal(self, ctx: FaultContext) -> None:
        """Resume a run still stopped at in_work (until_claimed)."""
        heal_stopped(self, ctx, *(lambda w=worker: self._resume(ctx, w) for worker in list(self.stopped)))
